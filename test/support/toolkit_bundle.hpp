// Bundles that carry the NVIDIA container toolkit packages, for the tests
// of the toolkit stage: the stand-in packages (test/tools/
// make-toolkit-packages.sh) copied into packages/<family>/ and listed in
// bundle.toml's [[files]] and [[packages]], unsigned (the tests pass
// --insecure-skip-signature; signing has tests of its own).
#pragma once

#include <string>
#include <vector>

#include "gpunode/bundle.hpp"

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
    const std::string& version, const std::string& arch = "amd64");

// Writes the bundle directory `dir` holding exactly `packages`.
void write_toolkit_bundle(const std::string& dir,
                          const std::vector<BuiltPackage>& packages);

}  // namespace gpunode::test
