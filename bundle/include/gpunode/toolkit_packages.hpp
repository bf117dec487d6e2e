// The NVIDIA container toolkit as packages on the stick: what a complete set
// is, how one package file is read, and which set fits a host.
//
// NVIDIA publishes the toolkit as four packages of one version, for Debian
// and Ubuntu (.deb) and for RHEL and its derivatives (.rpm), with these
// dependencies (nvidia-container-toolkit's packaging/debian/control and
// packaging/rpm/SPECS/nvidia-container-toolkit.spec):
//   nvidia-container-toolkit       -> nvidia-container-toolkit-base (= V),
//                                     libnvidia-container-tools (>= V)
//   nvidia-container-toolkit-base  (nvidia-container-runtime, nvidia-ctk)
//   libnvidia-container-tools      -> libnvidia-container1 (>= V)
//   libnvidia-container1
// `bundle create --toolkit-packages DIR` reads each file's own control
// (.deb: the ar member control.tar.*) or header (.rpm) data, never trusts
// the file name, and records the set in bundle.toml's [[packages]].
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "gpunode/bundle.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

inline constexpr std::array<std::string_view, 4> kToolkitPackageNames = {
    "nvidia-container-toolkit", "nvidia-container-toolkit-base",
    "libnvidia-container-tools", "libnvidia-container1"};

// What a package file says about itself.
struct PackageInfo {
  std::string family;  // "deb" or "rpm", from the file's format (not its name)
  std::string name;
  std::string version;  // deb Version; rpm VERSION-RELEASE (epoch dropped)
  std::string arch;     // deb Architecture; rpm ARCH
};

// Reads a .deb's control file or an .rpm's header. Errors: kUsage for a file
// that is neither, or whose metadata is malformed or lacks a field (the
// message names the file and the field); kBlocked when it cannot be read.
Result<PackageInfo> read_package_info(const std::string& path);
// The same over a file already open at its start; `path` names it in
// messages. bundle verify reads the package it has just hashed through the
// descriptor it checked.
Result<PackageInfo> read_package_info_fd(int fd, const std::string& path);

// The package architecture of the host's machine (uname -m) in a family's
// words: x86_64 -> deb "amd64" / rpm "x86_64", aarch64 -> "arm64"/"aarch64".
// Empty for a machine NVIDIA publishes no toolkit for.
std::string package_arch(std::string_view family, std::string_view machine);

}  // namespace gpunode
