// The harness of the bad-input corpus (see bad_inputs.hpp).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "bad_inputs.hpp"
#include "containerd_fixture.hpp"
#include "oci_builder.hpp"

namespace gpunode::test::bad {
namespace {

// gpunode's own state (journal, lock): the one place a refused install may
// write. The journal is checked separately.
const std::string kStateDir = "/var/lib/gpunode";

// One simulated node and one signed bundle for the whole test binary: both
// take a while to make, and a refused run changes neither (the checks
// below prove it, case by case, so sharing hides nothing).
struct Shared {
  TempDir dir;
  std::string root = dir.path() + "/node";
  std::string bundle = dir.path() + "/bundle-template";
  std::string key = dir.path() + "/publisher";
  std::unique_ptr<K3sSim> sim;

  K3sSim& node() {
    if (!sim) {
      make_host_tree(root, "good-v3");
      SimOptions o;
      o.root = root;
      o.plugin_start_ms = 50;
      sim = std::make_unique<K3sSim>(o);
    }
    return *sim;
  }
  const std::string& signed_bundle() {
    struct stat st {};
    if (::stat(bundle.c_str(), &st) == 0) return bundle;
    const std::string archive = dir.path() + "/dp.tar";
    build_image(archive, ImageSpec{});
    Run k = run_gpunode({"bundle", "keygen", "--out", key});
    if (k.exit_code != 0) throw std::runtime_error("keygen: " + k.err);
    Run c = run_gpunode({"bundle", "create", "--out", bundle, "--image-archive",
                         archive, "--sign-key", key + ".key", "--created",
                         "2026-11-29T00:00:00Z"});
    if (c.exit_code != 0) throw std::runtime_error("bundle create: " + c.err);
    return bundle;
  }
};

Shared& shared() {
  static Shared s;
  return s;
}

// The tree but gpunode's state directory (not even read: a case puts a
// sparse 1 GB journal there): type, mode, link target or content.
void host_files(const std::string& root, const std::string& rel,
                std::map<std::string, std::string>& out) {
  DIR* d = ::opendir((root + rel).c_str());
  if (!d) return;
  while (dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name == "." || name == "..") continue;
    const std::string r = rel + "/" + name;
    if (r == kStateDir) continue;
    struct stat st {};
    if (::lstat((root + r).c_str(), &st) != 0) continue;
    std::string v = std::to_string(st.st_mode) + ":";
    if (S_ISREG(st.st_mode) && st.st_size > (16 << 20)) {
      // The sparse 1 GB inputs: size and mtime say enough, fast.
      v += std::to_string(st.st_size) + "@" +
           std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec);
    } else if (S_ISREG(st.st_mode)) {
      v += read_text(root + r);
    } else if (S_ISLNK(st.st_mode)) {
      char target[4096];
      const ssize_t n = ::readlink((root + r).c_str(), target, sizeof target);
      v += std::string(target, n > 0 ? static_cast<std::size_t>(n) : 0);
    }
    out[r] = v;
    if (S_ISDIR(st.st_mode)) host_files(root, r, out);
  }
  ::closedir(d);
}

std::map<std::string, std::string> host_files(const std::string& root) {
  std::map<std::string, std::string> out;
  host_files(root, "", out);
  return out;
}

// Type, mode, size and mtime of everything under `dir`, without reading
// contents: the scratch dir holds a sparse 1 GB file and FIFOs.
void stat_tree(const std::string& dir, const std::string& rel,
               std::map<std::string, std::string>& out) {
  DIR* d = ::opendir((dir + rel).c_str());
  if (!d) return;
  while (dirent* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name == "." || name == "..") continue;
    const std::string r = rel + "/" + name;
    struct stat st {};
    if (::lstat((dir + r).c_str(), &st) != 0) continue;
    out[r] = std::to_string(st.st_mode) + ":" + std::to_string(st.st_size) +
             ":" + std::to_string(st.st_mtim.tv_sec) + "." +
             std::to_string(st.st_mtim.tv_nsec);
    if (S_ISDIR(st.st_mode)) stat_tree(dir, r, out);
  }
  ::closedir(d);
}

std::map<std::string, std::string> stat_tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  stat_tree(dir, "", out);
  return out;
}

// A refused run may record what it found ("satisfied", "blocked"), never
// that it changed something.
void check_journal(const std::string& root) {
  const std::string path = root + kStateDir + "/journal.json";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  auto j = nlohmann::json::parse(read_text(path), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("stages")) return;
  for (const auto& [stage, rec] : j["stages"].items()) {
    const std::string result = rec.value("result", "");
    INFO("journal: stage " << stage << " recorded as " << result);
    CHECK(result != "applied");
    CHECK(result != "started");
  }
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// The first control character in `text` that reached it raw (a newline ends
// a line and is fine), described with its offset; empty when there is none.
// Human output is never coloured here (stderr is not a terminal).
std::string raw_control(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool c1 = c == 0xC2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) < 0xA0;
    if ((c < 0x20 && c != '\n') || c == 0x7F || c1)
      return "byte " + std::to_string(c) + " at offset " + std::to_string(i) +
             ": ..." + text.substr(i < 40 ? 0 : i - 40, 80);
  }
  return {};
}

}  // namespace

std::vector<std::string> Env::install(std::vector<std::string> args) const {
  std::vector<std::string> argv{"install", "--root", root};
  bool has_timeout = false;
  for (const auto& a : args) has_timeout |= a == "--timeout";
  if (!has_timeout) argv.insert(argv.end(), {"--timeout", "20s"});
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string cd_config(const Env& e) {
  return e.root + "/var/lib/rancher/k3s/agent/etc/containerd/config.toml";
}

void replace_with_dir(const std::string& path) {
  ::unlink(path.c_str());
  if (::mkdir(path.c_str(), 0755) != 0)
    throw std::runtime_error("mkdir " + path);
  write_text(path + "/inside", "a file inside the directory\n");
}

void replace_with_fifo(const std::string& path) {
  ::unlink(path.c_str());
  if (::mkfifo(path.c_str(), 0644) != 0)
    throw std::runtime_error("mkfifo " + path);
}

void truncate_to(const std::string& path, long long bytes) {
  if (::truncate(path.c_str(), static_cast<off_t>(bytes)) != 0)
    throw std::runtime_error("truncate " + path);
}

void sed(const std::string& path, const std::string& from,
         const std::string& to) {
  std::string text = read_text(path);
  const auto at = text.find(from);
  if (at == std::string::npos)
    throw std::runtime_error(path + " has no '" + from + "'");
  text.replace(at, from.size(), to);
  write_text(path, text);
}

void run_bad_input(const BadInput& c) {
  Shared& s = shared();
  K3sSim& sim = s.node();
  TempDir scratch;
  Env e;
  e.dir = scratch.path();
  e.root = s.root;
  e.sim = &sim;
  make_host_tree(s.root, c.scenario);  // rm -rf first: a fresh tree
  // The simulator wrote its kubeconfig into the tree at start-up.
  write_text(s.root + "/etc/rancher/k3s/k3s.yaml", read_text(sim.kubeconfig()),
             0600);
  if (c.needs & kBundle) {
    write_text(e.dir + "/usb/.keep", "");
    e.bundle = e.dir + "/usb/gpunode-bundle";
    e.key_pub = s.key + ".pub";
    Run cp = run_with_sim({"cp", "-a", s.signed_bundle(), e.bundle});
    REQUIRE(cp.exit_code == 0);
  }
  Containerd* ctd = nullptr;
  if (c.needs & kContainerd) {
    if (!containerd_available()) FAIL("needs root and Debian's containerd");
    ctd = &Containerd::shared();
  }
  const std::vector<std::string> args = c.setup(e);

  const char* path = std::getenv("PATH");
  std::vector<std::string> env{
      "PATH=" + (ctd ? ctd->bin_dir() + ":" : std::string()) +
          GPUNODE_TEST_SIM + "/bin:" + (path ? path : "/usr/bin:/bin"),
      "GPUNODE_SIM_ROOT=" + s.root};
  env.insert(env.end(), e.env.begin(), e.env.end());

  const auto tree_before = host_files(s.root);
  const auto beside_before = stat_tree(e.dir);
  const auto writes_before = sim.stats()["writes"];
  std::vector<std::string> images_before;
  std::map<std::string, std::string> content_before;
  if (ctd) {
    images_before = ctd->image_names();
    content_before = ctd->content_digests();
  }

  std::vector<std::string> argv{GPUNODE_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  INFO("gpunode " << joined(args));
  Run r{};
  bool hung = false;
  try {
    r = run_with_sim(argv, env, std::chrono::seconds(40));
  } catch (const std::runtime_error&) {
    hung = true;  // killed after 40 s
  }
  REQUIRE_FALSE(hung);
  INFO("stderr:\n" << r.err << "\nstdout:\n" << r.out);
  CHECK(r.exit_code == c.exit_code);
  CHECK_THAT(r.err + r.out, Catch::Contains(c.fragment));
  // Whatever the input, the terminal gets no raw control character.
  CHECK(raw_control(r.err).empty());
  CHECK(host_files(s.root) == tree_before);
  CHECK(stat_tree(e.dir) == beside_before);
  CHECK(sim.stats()["writes"] == writes_before);
  check_journal(s.root);
  if (ctd) {
    CHECK(ctd->image_names() == images_before);
    CHECK(ctd->content_digests() == content_before);
  }
}

BadInput damaged(std::string name, std::string scenario,
                 std::function<void(Env&)> damage, int exit_code,
                 std::string fragment, std::vector<std::string> args) {
  return BadInput{std::move(name),
                  std::move(scenario),
                  kNone,
                  [damage, args](Env& e) {
                    damage(e);
                    return e.install(args);
                  },
                  exit_code,
                  std::move(fragment)};
}

void run_table(const std::string& area, const std::vector<BadInput>& cases) {
  for (const auto& c : cases) {
    DYNAMIC_SECTION(area << ": " << c.name) { run_bad_input(c); }
  }
}

}  // namespace gpunode::test::bad
