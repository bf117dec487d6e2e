// `gpunode bundle verify|keygen|create`: the offline bundle's command line.
// verify insists on a decision about trust: either a trusted publisher key
// (--trust-key or <root>/etc/gpunode/trusted-keys/*.pub) or an explicit
// --insecure-skip-signature; an unsigned check is never the silent default.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/self_files.hpp"
#include "cli/site_config.hpp"
#include "gpunode/bundle.hpp"
#include "gpunode/bundle_create.hpp"
#include "gpunode/bundle_trust.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/progress_display.hpp"
#include "gpunode/registry_auth.hpp"
#include "gpunode/registry_pull.hpp"
#include "gpunode/report.hpp"
#include "gpunode/system_host.hpp"
#include "gpunode/terminal_text.hpp"
#include "gpunode/text.hpp"
#include "gpunode/trust_anchor.hpp"

namespace gpunode {

namespace {

// Creates a new file; refuses to replace one (O_EXCL), so keygen can never
// overwrite a key that signed bundles already in the field.
Result<void> write_new_file(const std::string& path, const std::string& data,
                            mode_t mode) {
  const int fd = ::open(
      path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return usage_error(
        "--out: cannot create '" + path + "': " + std::strerror(errno) +
        (errno == EEXIST ? " (refusing to overwrite a key)" : ""));
  // The umask may have narrowed `mode`; a private key must be exactly 0600.
  ::fchmod(fd, mode);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return usage_error("--out: cannot write '" + path +
                         "': " + std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    return usage_error("--out: cannot write '" + path +
                       "': " + std::strerror(errno));
  return {};
}

// "4 toolkit packages (deb amd64 1.17.8-1), ": each set the bundle carries,
// or "" for none (bundle.toml's [[packages]], sorted by family and arch).
std::string package_summary(const std::vector<bundle::PackageEntry>& packages) {
  if (packages.empty()) return "";
  std::vector<std::string> sets;
  for (std::size_t i = 0; i < packages.size(); ++i) {
    const auto& p = packages[i];
    if (i > 0 && p.family == packages[i - 1].family &&
        p.arch == packages[i - 1].arch)
      continue;
    sets.push_back(p.family + " " + p.arch + " " + p.version);
  }
  return std::to_string(packages.size()) + " toolkit packages (" + join(sets) +
         "), ";
}

// "6 files, 714.7 MiB, 1 image, 4 toolkit packages (deb amd64 1.17.8-1), ":
// what create wrote and verify checked, in the same words.
std::uint64_t total_bytes(const bundle::Manifest& manifest) {
  std::uint64_t total = 0;
  for (const auto& file : manifest.files) total += file.size;
  return total;
}

std::string contents_summary(const bundle::Manifest& manifest) {
  const std::size_t images = manifest.images.size();
  return std::to_string(manifest.files.size()) + " files, " +
         human_bytes(total_bytes(manifest)) + ", " + std::to_string(images) +
         (images == 1 ? " image, " : " images, ") +
         package_summary(manifest.packages);
}

struct VerifyFlags {
  std::string path;
  std::vector<std::string> trust_keys;
  bool insecure = false;
  std::string root = "/";
  bool json = false;
  unsigned threads = 0;
};

int run_verify(const VerifyFlags& f, const std::set<std::string>& given,
               CommandIo& io) {
  Reporter report(io.out, io.err, f.json, false);
  auto fail = [&](const Error& e) {
    report.error(e);
    report.result("bundle verify", e.exit, "", {});
    return static_cast<int>(e.exit);
  };
  if (f.root.empty() || f.root.front() != '/')
    return fail(usage_error(
        "--root: must be an absolute directory path, got '" + f.root + "'"));
  if (f.threads > 1024)
    return fail(usage_error("--threads: at most 1024, got " +
                            std::to_string(f.threads)));

  // Site trust keys (GPUNODE_TRUST_KEYS, then config.toml's trust-keys)
  // stand in when no --trust-key is given, as for install --bundle.
  FlagValues site;
  site.root = f.root;
  site.trust_keys = f.trust_keys;
  auto settings = resolve_site_settings(site, given, process_env());
  if (!settings) return fail(settings.error());

  auto fs = make_rooted_file_system(f.root);
  auto trusted = bundle::trust_options(*fs, site.trust_keys, f.insecure,
                                       trust_keys_origin(*settings));
  if (!trusted) return fail(trusted.error());
  bundle::VerifyOptions options = std::move(*trusted);
  options.threads = f.threads;
  auto progress = make_cli_progress(f.json, io.out, io.err);
  options.progress = progress.get();
  const auto start = std::chrono::steady_clock::now();
  auto result = bundle::verify_bundle(f.path, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!result) return fail(result.error());

  const bundle::VerifyReport& r = *result;
  const double gbps = seconds > 0 ? r.bytes_hashed / seconds / 1e9 : 0;
  char rate[32];
  std::snprintf(rate, sizeof rate, "%.2f GB/s", gbps);
  const std::string signer =
      r.signed_by_trusted_key
          ? "signed by " + r.key_fingerprint
          : "signature NOT checked (--insecure-skip-signature)";
  const std::string summary =
      contents_summary(r.manifest) + signer + ", " + rate;
  if (f.json) {
    nlohmann::json packages = nlohmann::json::array();
    for (const auto& p : r.manifest.packages)
      packages.push_back({{"family", p.family},
                          {"arch", p.arch},
                          {"name", p.name},
                          {"version", p.version},
                          {"file", p.file},
                          {"sha256", p.sha256}});
    io.out << nlohmann::json{{"event", "result"},
                             {"schema", kJsonSchemaVersion},
                             {"command", "bundle verify"},
                             {"exit_code", 0},
                             {"status", "ok"},
                             {"files", r.manifest.files.size()},
                             {"bytes", total_bytes(r.manifest)},
                             {"bytes_hashed", r.bytes_hashed},
                             {"images", r.manifest.images.size()},
                             {"packages", packages},
                             {"signed", r.signed_by_trusted_key},
                             {"key_fingerprint", r.key_fingerprint},
                             {"seconds", seconds},
                             {"gb_per_s", gbps}}
                  .dump()
           << '\n';
  }
  io.err << "bundle verify: ok - " << terminal_safe(summary) << '\n';
  return 0;
}

void register_verify(CLI::App* bundle, CommandIo& io) {
  auto f = std::make_shared<VerifyFlags>();
  CLI::App* cmd = bundle->add_subcommand(
      "verify",
      "Check a bundle in place, read-only: bundle.toml's Ed25519 signature "
      "(with a trusted key); that the tree holds exactly the files [[files]] "
      "lists (no links, none missing or extra), each file's size, the "
      "SHA-256 of each chunk (chunk_bytes, 64 MiB) and of the whole file "
      "(what sha256sum -c checks); each [[images]] entry's ref and digest "
      "against its archive's index.json or manifest.json (the blobs are "
      "covered by the file hashes); each [[packages]] entry's family, name, "
      "version and arch against its .deb control or .rpm header. Exit 4 on "
      "any problem, each one named. Informational, not checked here: "
      "created, gpunode_version, min_driver (the driver stage compares it "
      "with the loaded driver), an image's name and platforms (the image "
      "stage verifies the archive for the node's platform before it "
      "imports)");
  cmd->add_option("PATH", f->path, "The bundle directory")->required();
  cmd->add_option("--trust-key", f->trust_keys,
                  "A publisher's Ed25519 public key (PEM); repeatable. Also "
                  "read: <root>/etc/gpunode/trusted-keys/*.pub. Default: "
                  "GPUNODE_TRUST_KEYS, else config.toml's trust-keys");
  cmd->add_flag("--insecure-skip-signature", f->insecure,
                "Do not check the signature (the files are still checked "
                "against bundle.toml, which nobody vouches for)");
  cmd->add_option("--root", f->root,
                  "Host root for the trusted-keys directory (default /)");
  cmd->add_flag("--json", f->json, "Also print one JSON result line on stdout");
  cmd->add_option("--threads", f->threads,
                  "Hashing threads (default 0: one per core)");
  cmd->callback([f, cmd, &io]() {
    io.exit_code = run_verify(*f, given_setting_flags(*cmd), io);
  });
}

void register_keygen(CLI::App* bundle, CommandIo& io) {
  auto out = std::make_shared<std::string>();
  CLI::App* cmd = bundle->add_subcommand(
      "keygen", "Make an Ed25519 key pair for signing bundles");
  cmd->add_option("--out", *out,
                  "Writes PREFIX.key (private, 0600) and PREFIX.pub; never "
                  "overwrites")
      ->required();
  cmd->callback([out, &io]() {
    Reporter report(io.out, io.err, false, false);
    const std::string key_path = *out + ".key";
    const std::string pub_path = *out + ".pub";
    struct stat st {};
    for (const std::string& p : {key_path, pub_path}) {
      if (::lstat(p.c_str(), &st) == 0) {
        report.error(usage_error("--out: '" + p +
                                 "' already exists (refusing to overwrite a "
                                 "key)"));
        io.exit_code = static_cast<int>(ExitCode::kUsage);
        return;
      }
    }
    auto pair = bundle::generate_keypair();
    Result<void> written =
        pair ? write_new_file(key_path, pair->private_pem, 0600)
             : Result<void>(pair.error());
    if (written) written = write_new_file(pub_path, pair->public_pem, 0644);
    if (!written) {
      report.error(written.error());
      io.exit_code = static_cast<int>(written.error().exit);
      return;
    }
    io.err << "wrote " << terminal_safe(key_path)
           << " (private; keep it off the nodes) and "
           << terminal_safe(pub_path) << " (give it to the nodes)\n";
    io.out << "fingerprint: " << bundle::key_fingerprint(pair->public_pem)
           << '\n';
    io.exit_code = 0;
  });
}

struct CreateFlags {
  std::string out;
  std::vector<std::string> image_archives;
  std::string sign_key;
  std::string created;
  std::string min_driver;
  std::vector<std::string> pulls;
  std::string registry_ca;
  std::string registry_auth;
  bool insecure_registry = false;
  std::string platforms;  // "linux/amd64,linux/arm64"
  std::vector<std::string> toolkit_package_dirs;
  bool json = false;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const auto comma = s.find(',', start);
    const std::string part = s.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void register_create(CLI::App* bundle, CommandIo& io) {
  auto f = std::make_shared<CreateFlags>();
  CLI::App* cmd = bundle->add_subcommand(
      "create",
      "Lay out a bundle directory for the USB stick: image archives, this "
      "binary, the manifests, bundle.toml (and its signature)");
  cmd->add_option("--out", f->out,
                  "The bundle directory to create (must not exist, or be "
                  "empty)")
      ->required();
  cmd->add_option("--image-archive", f->image_archives,
                  "An OCI-layout or docker-archive tar of a locked image (the "
                  "device plugin, or the CUDA sample for install --smoke); "
                  "repeatable");
  cmd->add_option("--sign-key", f->sign_key,
                  "Ed25519 private key (from 'gpunode bundle keygen')");
  cmd->add_option("--created", f->created,
                  "Creation time, ISO 8601 UTC (default: SOURCE_DATE_EPOCH, "
                  "else now)");
  cmd->add_option("--min-driver", f->min_driver,
                  "Minimum NVIDIA driver version the bundle needs");
  cmd->add_option("--pull", f->pulls,
                  "Pull an image from its registry (REGISTRY/REPO:TAG) into "
                  "the bundle; repeatable. A mirror's copy of a locked image "
                  "(same repository path and tag) counts as that image");
  cmd->add_option("--registry-ca", f->registry_ca,
                  "PEM CA file for the registry's TLS certificate (default: "
                  "the system CAs)");
  cmd->add_option("--registry-auth", f->registry_auth,
                  "Registry credentials file, containers-auth.json(5) or "
                  "Docker's config.json (default: $REGISTRY_AUTH_FILE, "
                  "$XDG_RUNTIME_DIR/containers/auth.json, "
                  "~/.config/containers/auth.json, ~/.docker/config.json; "
                  "none: anonymous pulls). Sent only when a registry asks");
  cmd->add_flag("--insecure-registry", f->insecure_registry,
                "Talk plain HTTP to the registry (content is still checked "
                "against its digests)");
  cmd->add_option("--toolkit-packages", f->toolkit_package_dirs,
                  "A directory holding NVIDIA's four container toolkit "
                  "packages (nvidia-container-toolkit, "
                  "nvidia-container-toolkit-base, libnvidia-container-tools, "
                  "libnvidia-container1) of one version, as .deb or .rpm "
                  "files for one architecture; repeatable, one directory per "
                  "family and architecture");
  cmd->add_flag("--json", f->json,
                "Also print JSON events on stdout: errors, and a result line "
                "(docs/json-events.md)");
  cmd->add_option("--platform", f->platforms,
                  "Platforms to pull and record, comma-separated (default "
                  "linux/amd64,linux/arm64)");
  cmd->callback([f, &io]() {
    // create writes a partial bundle next to --out: a Ctrl-C must let it
    // remove that (exit 130) rather than kill it half-way.
    install_interrupt_handlers();
    Reporter report(io.out, io.err, f->json, false);
    auto fail = [&](const Error& e) {
      report.error(e);
      if (f->json) report.result("bundle create", e.exit, e.message, {});
      io.exit_code = static_cast<int>(e.exit);
    };
    bundle::CreateOptions options;
    options.out = f->out;
    options.image_archives = f->image_archives;
    options.toolkit_package_dirs = f->toolkit_package_dirs;
    options.created = f->created;
    options.min_driver = f->min_driver;
    if (!f->platforms.empty()) {
      options.platforms = split_commas(f->platforms);
      if (options.platforms.empty())
        return fail(
            usage_error("--platform: no platform in '" + f->platforms + "'"));
    }
    if (options.image_archives.empty() && f->pulls.empty())
      return fail(usage_error(
          "bundle create needs at least one --image-archive or --pull"));
    if (!f->registry_ca.empty() && ::access(f->registry_ca.c_str(), R_OK) != 0)
      return fail(usage_error("--registry-ca: cannot read '" + f->registry_ca +
                              "': " + std::strerror(errno)));
    // The CA decides whose images go into a bundle that is then signed:
    // an anchor, like a trusted key.
    if (!f->registry_ca.empty()) {
      if (auto safe = check_trust_anchor(f->registry_ca, "--registry-ca");
          !safe)
        return fail(safe.error());
    }
    // The key is read before any pull: a typo must not cost a download.
    if (!f->sign_key.empty()) {
      auto key = bundle::read_key_file(f->sign_key, "--sign-key");
      if (!key) return fail(key.error());
      options.sign_key_pem = std::move(*key);
    }
    // Pulls go straight into the bundle's images/ (create_bundle checks
    // --out and every ref first, so a mistake costs no download).
    // Credentials: read once, before any pull; only the entries for the
    // pulled registries leave this block, never the file.
    std::vector<bundle::AuthFile> auth_files;
    if (f->pulls.empty() && !f->registry_auth.empty())
      io.err << "bundle create: note: --registry-auth "
             << terminal_safe(f->registry_auth)
             << " is not read: nothing is pulled without --pull\n";
    if (!f->pulls.empty()) {
      auto files =
          bundle::load_auth_files(f->registry_auth, &bundle::process_env);
      if (!files) return fail(files.error());
      auth_files = std::move(*files);
    }
    for (const auto& file : auth_files)
      if (file.readable_by_others)
        io.err << "bundle create: note: " << terminal_safe(file.path)
               << " holds registry passwords and is readable by other "
                  "users (chmod 600 it)\n";
    for (const auto& ref : f->pulls) {
      bundle::PullOptions pull;
      auto credentials = bundle::credentials_for(auth_files, ref);
      if (!credentials) return fail(credentials.error());
      pull.credentials = std::move(*credentials);
      if (!pull.credentials)
        pull.no_credentials_note = bundle::helper_note(auth_files);
      pull.ref = ref;
      pull.platforms = options.platforms;
      pull.ca_file = f->registry_ca;
      pull.insecure_http = f->insecure_registry;
      pull.name_as = bundle::archive_name_for(ref);
      options.pulls.push_back(std::move(pull));
    }
    auto progress = make_cli_progress(false, io.out, io.err);
    options.progress = progress.get();
    options.note = [&io](const std::string& line) {
      io.err << "bundle create: " << terminal_safe(line) << '\n';
    };
    auto self = locate_self();
    if (!self) return fail(self.error());
    options.self_binary = self->binary;
    options.runtime_files = self->runtime_files;
    options.collections_root = self->collections_root;
    options.collection_files = self->collection_files;
    auto result = bundle::create_bundle(options);
    if (!result) return fail(result.error());
    io.err << "bundle create: wrote " << terminal_safe(result->out) << " - "
           << terminal_safe(contents_summary(result->manifest))
           << (result->signed_ ? "signed" : "NOT signed") << '\n';
    if (f->json) {
      nlohmann::json ignored = nlohmann::json::array();
      for (const auto& [dir, names] : result->ignored)
        if (!names.empty()) ignored.push_back({{"dir", dir}, {"files", names}});
      io.out << nlohmann::json{{"event", "result"},
                               {"schema", kJsonSchemaVersion},
                               {"command", "bundle create"},
                               {"exit_code", 0},
                               {"status", "ok"},
                               {"out", result->out},
                               {"files", result->manifest.files.size()},
                               {"signed", result->signed_},
                               {"ignored", ignored}}
                    .dump(-1, ' ', false,
                          nlohmann::json::error_handler_t::replace)
             << '\n';
    }
    io.exit_code = 0;
  });
}

}  // namespace

void register_bundle(CLI::App& app, CommandIo& io) {
  CLI::App* cmd = app.add_subcommand(
      "bundle", "Make, sign and check offline bundles (USB stick)");
  cmd->require_subcommand(1);
  register_verify(cmd, io);
  register_keygen(cmd, io);
  register_create(cmd, io);
}

}  // namespace gpunode
