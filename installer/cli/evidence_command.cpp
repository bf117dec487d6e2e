// `gpunode evidence`: write this node's signed evidence record; `gpunode
// evidence verify FILE`: check one offline (evidence/evidence_record.hpp),
// and, given a kubeconfig, that the Node publishes the key that signed it.
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/site_config.hpp"
#include "evidence/evidence_collect.hpp"
#include "evidence/evidence_key.hpp"
#include "evidence/evidence_record.hpp"
#include "gpunode/kube.hpp"
#include "gpunode/report.hpp"
#include "gpunode/system_host.hpp"
#include "gpunode/terminal_text.hpp"

namespace gpunode {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxRecordBytes = 64 * 1024 * 1024;

struct VerifyFlags {
  std::string file;
  std::string root = "/";
  std::string kubeconfig;
  std::string timeout = "30s";
  bool json = false;
};

int emit(CommandIo& io, bool as_json, const std::string& command, ExitCode code,
         const std::string& summary, json extra) {
  if (as_json) {
    json e = Reporter::result_event(command, code, summary, {});
    for (const auto& [k, v] : extra.items()) e[k] = v;
    io.out << e.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  }
  return static_cast<int>(code);
}

int fail(CommandIo& io, bool as_json, const std::string& command,
         const Error& e) {
  Reporter report(io.out, io.err, false, false);
  report.error(e);
  io.err << command << ": " << terminal_safe(e.message) << '\n';
  if (as_json) io.out << Reporter::error_event(e).dump() << '\n';
  return emit(io, as_json, command, e.exit, e.message, json::object());
}

// The key the Node publishes (kEvidenceKeyAnnotation), read with the
// kubeconfig given: an admin's, or the node's own.
Result<std::string> published_key(const VerifyFlags& f,
                                  const std::string& node) {
  auto host = make_system_host(f.root);
  auto config = kube::load_kubeconfig(host->fs(), f.kubeconfig);
  if (!config) return config.error();
  auto client = kube::Client::connect(*config, host->clock());
  if (!client) return client.error();
  auto timeout = parse_duration(f.timeout);
  if (!timeout) return timeout.error();
  auto live = (*client)->get("/api/v1/nodes/" + node,
                             host->clock().steady_now() + *timeout);
  if (!live) return live.error();
  if (!*live)
    return Error{ExitCode::kIntegrity, "evidence",
                 "the cluster has no Node " + node + " to vouch for the key",
                 "verify against the cluster the node belongs to"};
  return (**live)["metadata"]
      .value("annotations", json::object())
      .value(kEvidenceKeyAnnotation, "");
}

int run_verify(const VerifyFlags& f, CommandIo& io) {
  const std::string command = "evidence verify";
  struct stat st {};
  if (::stat(f.file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return fail(io, f.json, command,
                Error{ExitCode::kUsage, "usage",
                      "FILE: '" + terminal_safe(f.file) +
                          "' is not a readable regular file",
                      "give the path of an evidence record"});
  if (static_cast<std::uint64_t>(st.st_size) > kMaxRecordBytes)
    return fail(io, f.json, command,
                Error{ExitCode::kIntegrity, "evidence",
                      "the evidence record is larger than 64 MiB: not one of "
                      "gpunode's",
                      "take the record again from the node"});
  std::ifstream in(f.file, std::ios::binary);
  if (!in)
    return fail(io, f.json, command,
                Error{ExitCode::kUsage, "usage",
                      "FILE: cannot read '" + terminal_safe(f.file) + "'",
                      "give the path of an evidence record"});
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxRecordBytes)
    return fail(io, f.json, command,
                Error{ExitCode::kIntegrity, "evidence",
                      "the evidence record is larger than 64 MiB: not one of "
                      "gpunode's",
                      "take the record again from the node"});
  auto verified = verify_evidence(text.str());
  if (!verified) return fail(io, f.json, command, verified.error());
  const json& r = verified->record;
  const std::string node = r.value("node", "");
  // The name goes into an API path: a Node's name or nothing (regression,
  // independent try of issue 27: "../namespaces/default/configmaps/x").
  if (!valid_node_name(node))
    return fail(io, f.json, command,
                Error{ExitCode::kIntegrity, "evidence",
                      "the evidence record does not verify: its node '" +
                          terminal_safe(node) + "' is no Kubernetes node name",
                      "take the record again from the node"});
  json extra = {{"file", f.file},
                {"node", node},
                {"time", r.value("time", json())},
                {"key_fingerprint", verified->fingerprint},
                {"published", nullptr}};
  // Offline, a signature shows only that the record is whole: who holds
  // the key, the Node vouches for (--kubeconfig).
  std::string summary =
      "intact, signed by " + verified->fingerprint + " (node " + node + ", " +
      r.value("time", std::string("?")) + ")" +
      (f.kubeconfig.empty() ? "; the key is not vouched for: give "
                              "--kubeconfig to check that Node " +
                                  node + " publishes it"
                            : "");
  if (!f.kubeconfig.empty()) {
    auto published = published_key(f, node);
    if (!published) return fail(io, f.json, command, published.error());
    if (*published != verified->public_pem)
      return fail(io, f.json, command,
                  Error{ExitCode::kIntegrity, "evidence",
                        "the record is signed by " + verified->fingerprint +
                            ", but Node " + node + " publishes " +
                            (published->empty() ? std::string("no key")
                                                : "another key") +
                            " (" + kEvidenceKeyAnnotation + ")",
                        "take the record from the node itself (gpunode "
                        "evidence); a record signed by another key is not "
                        "its own"});
    extra["published"] = true;
    summary += "; Node " + node + " publishes this key";
  }
  io.err << command << ": ok - " << terminal_safe(summary) << '\n';
  return emit(io, f.json, command, ExitCode::kOk, summary, extra);
}

int run_evidence(FlagValues flags, const CLI::App& cmd, CommandIo& io) {
  const std::string command = "evidence";
  auto settings =
      resolve_site_settings(flags, given_setting_flags(cmd), process_env());
  if (!settings) return fail(io, flags.json, command, settings.error());
  auto options = validate_flags(flags);
  if (!options)
    return fail(io, flags.json, command,
                with_help_fix(options.error(), command));
  options->trust_keys_origin = trust_keys_origin(*settings);
  note_given_flags(cmd, *options);
  // As status: the plan of what the cluster runs, not of a default.
  options->sharing_from_cluster = !options->sharing_given;
  auto host = make_system_host(options->root);
  auto written = write_evidence(*host, *options);
  if (!written) return fail(io, flags.json, command, written.error());
  const std::string summary = "wrote " + written->path + " (" +
                              std::to_string(written->bytes) +
                              " bytes, signed by " + written->fingerprint + ")";
  io.err << command << ": ok - " << terminal_safe(summary) << '\n';
  return emit(io, flags.json, command, ExitCode::kOk, summary,
              {{"path", written->path},
               {"bytes", written->bytes},
               {"key_fingerprint", written->fingerprint},
               {"node", written->record.value("node", "")}});
}

}  // namespace

void register_evidence(CLI::App& app, CommandIo& io) {
  auto flags = std::make_shared<FlagValues>();
  CLI::App* cmd = app.add_subcommand(
      "evidence",
      "Write this node's signed evidence record to <state-dir>/evidence/"
      "<time>.json: the node and its role, gpunode's version and digest, "
      "the bundle's digest and signer (with --bundle), the images' digests "
      "and pins, the driver, CUDA, toolkit, containerd and k3s versions, "
      "the node's plan, every stage's check code and facts (a read-only "
      "pass, as status), and the last proof of its GPUs on this host. "
      "Signed with the node's Ed25519 key (made by the first install, "
      "root-only in the state dir; its public half is on the Node as "
      "gpunode.io/evidence-key). Schema: docs/evidence.md");
  add_flags(cmd, *flags, FlagSet::kStatus);
  auto vf = std::make_shared<VerifyFlags>();
  CLI::App* verify = cmd->add_subcommand(
      "verify",
      "Check an evidence record offline: its canonical form and its "
      "Ed25519 signature; with --kubeconfig, also that its Node publishes "
      "the key that signed it. Exit 4 when it does not verify (a changed "
      "byte, another key)");
  verify->add_option("FILE", vf->file, "The evidence record")->required();
  verify->add_option("--kubeconfig", vf->kubeconfig,
                     "Also ask this cluster whether the record's Node "
                     "publishes the signing key (a host path, under --root)");
  verify->add_option("--root", vf->root,
                     "Directory that stands for the host's / (default /)");
  verify->add_option("--timeout", vf->timeout,
                     "Give up on the cluster after this long (default 30s)");
  verify->add_flag("--json", vf->json,
                   "One JSON result line on stdout; human text on stderr");
  verify->callback([vf, flags, verify, &io]() {
    // `evidence --root DIR verify FILE`: the root given before the word.
    if (verify->count("--root") == 0) vf->root = flags->root;
    io.exit_code = run_verify(*vf, io);
  });
  cmd->callback([flags, cmd, verify, &io]() {
    if (verify->parsed()) return;
    io.exit_code = run_evidence(*flags, *cmd, io);
  });
}

}  // namespace gpunode
