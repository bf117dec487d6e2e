#include "toolkit_bundle.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "gpunode/digest.hpp"
#include "gpunode/toolkit_packages.hpp"
#include "test_support.hpp"
#include "toolkit_package_files.hpp"

namespace gpunode::test {

std::vector<BuiltPackage> make_bundle_packages(
    const std::string& out, const std::string& family,
    const std::string& version, const std::string& arch,
    const std::string& postinst_sleep) {
  make_toolkit_packages(out, family, version, arch, postinst_sleep);
  const std::string rpm_arch = arch == "amd64" ? "x86_64" : "aarch64";
  std::vector<BuiltPackage> built;
  for (const auto name : kToolkitPackageNames) {
    BuiltPackage p;
    p.entry.family = family;
    p.entry.name = std::string(name);
    p.entry.version = version;
    p.entry.arch = family == "deb" ? arch : rpm_arch;
    // The builder's file names (make-toolkit-packages.sh).
    const std::string base =
        family == "deb"
            ? p.entry.name + "_" + version + "_" + arch + ".deb"
            : p.entry.name + "-" + version + "." + rpm_arch + ".rpm";
    p.entry.file = "packages/" + family + "/" + base;
    p.source = out + "/" + base;
    p.entry.sha256 = sha256_hex(read_text(p.source));
    built.push_back(std::move(p));
  }
  return built;
}

void add_script_runtime(const std::string& root) {
  namespace fs = std::filesystem;
  for (const char* d : {"/tmp", "/bin", "/usr/bin"})
    fs::create_directories(root + d);
  fs::copy_file("/bin/dash", root + "/bin/sh");
  fs::copy_file("/bin/sleep", root + "/usr/bin/sleep");
  // Their shared libraries, where the dynamic loader looks for them.
  Run ldd = run_with_sim({"ldd", "/bin/dash", "/bin/sleep"});
  if (ldd.exit_code != 0) throw std::runtime_error("ldd failed: " + ldd.err);
  std::istringstream lines(ldd.out);
  for (std::string word; lines >> word;) {
    if (word.empty() || word[0] != '/' || word.back() == ':') continue;
    const std::string to = root + word;
    if (fs::exists(to)) continue;
    fs::create_directories(fs::path(to).parent_path());
    fs::copy_file(word, to);
  }
}

std::string dpkg_node_unavailable() {
  return ::geteuid() == 0 ? ""
                          : "dpkg --root runs maintainer scripts chrooted, "
                            "which needs root";
}

DpkgNode::DpkgNode() {
  namespace fs = std::filesystem;
  make_host_tree(root, "no-toolkit");
  for (const char* d : {"/var/lib/dpkg/info", "/var/lib/dpkg/updates",
                        "/var/lib/dpkg/triggers"})
    fs::create_directories(root + d);
  write_text(root + "/var/lib/dpkg/status", "");
  write_text(root + "/var/lib/dpkg/available", "");
  add_script_runtime(root);
}

std::string DpkgNode::postinst_pid_file() const {
  return root + "/tmp/gpunode-test-postinst.pid";
}

bool DpkgNode::wait_for_postinst() const {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(postinst_pid_file())) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::vector<std::string> DpkgNode::env() const {
  return {"PATH=" + std::string(GPUNODE_TEST_SIM) +
          "/bin:" + std::getenv("PATH")};
}

std::string DpkgNode::states() const {
  std::vector<std::string> argv{"dpkg-query",
                                "--admindir=" + root + "/var/lib/dpkg", "-W",
                                "-f", "${Package} ${db:Status-Abbrev}\n"};
  for (const auto name : kToolkitPackageNames) argv.emplace_back(name);
  Run q = run_with_sim(argv);
  std::istringstream in(q.out);
  std::vector<std::string> lines;
  for (std::string name, state; in >> name >> state;)
    lines.push_back(name + " " + state);
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  return text;
}

std::vector<std::string> DpkgNode::install_argv(
    const std::vector<std::string>& extra) const {
  std::vector<std::string> argv{GPUNODE_BINARY,
                                "install",
                                "--root",
                                root,
                                "--bundle",
                                bundle,
                                "--insecure-skip-signature",
                                "--only",
                                "toolkit",
                                "--json"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::string all_installed_states() {
  std::vector<std::string> names{kToolkitPackageNames.begin(),
                                 kToolkitPackageNames.end()};
  std::sort(names.begin(), names.end());
  std::string text;
  for (const auto& n : names) text += n + " ii\n";
  return text;
}

void write_toolkit_bundle(const std::string& dir,
                          const std::vector<BuiltPackage>& packages) {
  bundle::Manifest m;
  m.created = "2026-12-02T00:00:00Z";
  m.gpunode_version = "0.1.0";
  for (const auto& p : packages) {
    const std::string to = dir + "/" + p.entry.file;
    std::filesystem::create_directories(
        std::filesystem::path(to).parent_path());
    std::filesystem::copy_file(p.source, to);
    const std::string data = read_text(to);
    // One chunk: a stand-in package is far below bundle::kChunkBytes.
    m.files.push_back(
        {p.entry.file, data.size(), p.entry.sha256, {p.entry.sha256}});
    m.packages.push_back(p.entry);
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  write_text(dir + "/bundle.toml", bundle::write_manifest(m));
}

}  // namespace gpunode::test
