// Bundles that carry the NVIDIA container toolkit packages, for the tests
// of the toolkit stage: the stand-in packages (test/tools/
// make-toolkit-packages.sh) copied into packages/<family>/ and listed in
// bundle.toml's [[files]] and [[packages]], unsigned (the tests pass
// --insecure-skip-signature; signing has tests of its own).
#pragma once

#include <string>
#include <vector>

#include "gpunode/bundle.hpp"
#include "test_support.hpp"

namespace gpunode::test {

// One built package: its [[packages]] entry (file relative to the bundle)
// and where the builder put it.
struct BuiltPackage {
  bundle::PackageEntry entry;
  std::string source;
};

// Builds the four stand-ins (make_toolkit_packages, toolkit_package_files.hpp)
// into `out`, in kToolkitPackageNames order, with their [[packages]]
// entries. arch is Debian's word (amd64, arm64); the rpm entries carry rpm's
// (x86_64, aarch64), as the packages themselves do.
std::vector<BuiltPackage> make_bundle_packages(
    const std::string& out, const std::string& family,
    const std::string& version, const std::string& arch = "amd64",
    const std::string& postinst_sleep = "");

// What a maintainer script or scriptlet needs inside `root` (dpkg --root and
// rpm --root run it chrooted there): /bin/sh and sleep with their shared
// libraries, copied from this machine, and /tmp.
void add_script_runtime(const std::string& root);

// Why a DpkgNode cannot work here, or "": dpkg --root runs maintainer
// scripts chrooted, which needs root.
std::string dpkg_node_unavailable();

// A node without the toolkit (host-tree.sh no-toolkit) whose packages dpkg
// manages: an empty dpkg database and add_script_runtime. And where its
// bundle goes.
struct DpkgNode {
  TempDir t;
  std::string root = t.path() + "/node";
  std::string bundle = t.path() + "/bundle";
  DpkgNode();
  // The stand-ins' pid file: their slow postinst is running (or ran).
  std::string postinst_pid_file() const;
  // Waits (up to 30 s) until dpkg runs the slow postinst: dpkg is inside
  // its transaction. False when it never did.
  bool wait_for_postinst() const;
  // PATH for gpunode under test: the simulated host's programs first.
  std::vector<std::string> env() const;
  // "name state" per toolkit package, sorted (dpkg-query's
  // db:Status-Abbrev, trimmed): "... ii" each once all four are installed.
  std::string states() const;
  // The argv of `gpunode install --only toolkit --json` for this node.
  std::vector<std::string> install_argv(
      const std::vector<std::string>& extra = {}) const;
};

// "name ii" for each of the four, sorted: all installed.
std::string all_installed_states();

// Writes the bundle directory `dir` holding exactly `packages`.
void write_toolkit_bundle(const std::string& dir,
                          const std::vector<BuiltPackage>& packages);

}  // namespace gpunode::test
