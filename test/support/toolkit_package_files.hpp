// Stand-ins for NVIDIA's container toolkit packages, built by
// test/tools/make-toolkit-packages.sh with the real dpkg-deb / rpmbuild
// (scripts/setup.sh installs both: missing, the test fails).
#pragma once

#include <string>
#include <vector>

namespace gpunode::test {

// Builds the four packages into `dir` and returns their paths, sorted.
// Throws when the script fails.
std::vector<std::string> make_toolkit_packages(
    const std::string& dir, const std::string& family = "deb",
    const std::string& version = "1.17.8-1", const std::string& arch = "amd64");

}  // namespace gpunode::test
