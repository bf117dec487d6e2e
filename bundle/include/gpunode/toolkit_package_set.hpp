// `bundle create --toolkit-packages DIR`: the packages of one directory
// must be NVIDIA's complete toolkit set (kToolkitPackageNames) of one
// family, one architecture and one version; one directory per family and
// architecture. Everything is checked before the bundle is written.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gpunode/result.hpp"
#include "gpunode/toolkit_packages.hpp"

namespace gpunode::bundle {

struct ToolkitPackageFile {
  std::string path;  // the file given
  PackageInfo info;  // what it says about itself
};

struct ToolkitPackageSet {
  std::string dir;
  std::string family, arch, version;
  std::vector<ToolkitPackageFile> files;  // in kToolkitPackageNames order
  // The directory's other files (not .deb or .rpm: the vendor's README,
  // checksums, ...), by name, sorted: skipped, and noted in one line.
  std::vector<std::string> ignored;
};

// The one note for a directory's other files: "ignoring DIR/README (not a
// .deb or .rpm)", or "ignoring 12 other files in DIR (not .deb or .rpm): a,
// b, c and 9 more".
std::string ignored_files_note(const std::string& dir,
                               const std::vector<std::string>& names);

// The file's name in the bundle, made from its metadata (whose characters
// check_package_fields limited): packages/deb/NAME_VERSION_ARCH.deb (the
// epoch dropped, as dpkg-name(1) and the Debian archive do) or
// packages/rpm/NAME-VERSION-RELEASE.ARCH.rpm (rpmbuild's name).
std::string package_bundle_file(const PackageInfo& info);

// The set check over files already read. kUsage naming every problem
// (missing, extra or repeated package, mixed family, architecture or
// version, an architecture NVIDIA publishes no toolkit for) and the files.
Result<ToolkitPackageSet> check_toolkit_package_set(
    const std::string& dir, std::vector<ToolkitPackageFile> files);

// Reads every *.deb and *.rpm in `dir` (not below it; anything else is
// skipped, with one note for all; a link or non-regular file is refused)
// and checks the set.
Result<ToolkitPackageSet> read_toolkit_package_dir(
    const std::string& dir,
    const std::function<void(const std::string&)>& note);

// Every --toolkit-packages DIR; two sets of one family and architecture:
// kUsage.
Result<std::vector<ToolkitPackageSet>> read_toolkit_package_dirs(
    const std::vector<std::string>& dirs,
    const std::function<void(const std::string&)>& note);

// The bundle's copy of `file` says what the original said when it was
// checked: a file changed in between is refused (kUsage) rather than
// recorded under metadata it no longer has.
Result<void> confirm_copied_package(const std::string& copy,
                                    const ToolkitPackageFile& file);

}  // namespace gpunode::bundle
