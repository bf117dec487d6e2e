// The pieces behind read_package_info (toolkit_packages.hpp): the .deb and
// .rpm readers over bytes already in memory or read in order from a file,
// and the checks every field a package says about itself goes through.
// Separate so that the unit tests and the fuzz target reach the parsers
// without a file.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "gpunode/result.hpp"
#include "gpunode/toolkit_packages.hpp"

namespace gpunode {

// How many leading bytes decide a file's format: "!<arch>\ndebian-binary"
// (an ar archive whose first member is debian-binary, deb(5)) or the rpm
// lead's magic ed ab ee db (rpm.org, docs/manual/format.md).
inline constexpr std::size_t kPackageMagicBytes = 21;
enum class PackageFormat { kNeither, kDeb, kRpm };
PackageFormat sniff_package_format(std::string_view head);
// The format of the regular file at `path`, from its first bytes, never its
// name. Errors: it cannot be opened or read, or is not a regular file.
Result<PackageFormat> package_file_format(const std::string& path);

// Reads exactly n bytes, the next ones of the input; a short input is
// kUsage ("truncated"), a failed read kBlocked.
using ByteReader = std::function<Result<std::string>(std::size_t n)>;

// .deb: libarchive reads the ar container from `fd` (positioned at 0) or
// from `bytes`; the control.tar member is read in memory, bounded.
Result<PackageInfo> read_deb_info_fd(int fd, const std::string& source);
Result<PackageInfo> read_deb_info_bytes(std::string_view bytes,
                                        const std::string& source);
// The first stanza of a deb-control(5) file: Package, Version, Architecture.
Result<PackageInfo> parse_deb_control(std::string_view text,
                                      const std::string& source);

// .rpm: lead, signature header, main header, parsed natively and bounded.
Result<PackageInfo> read_rpm_info(const ByteReader& read,
                                  const std::string& source);

// read_package_info over bytes in memory (format from the content).
Result<PackageInfo> read_package_info_bytes(std::string_view bytes,
                                            const std::string& source);

// Every field of `info`: no control character (kUsage, the text escaped in
// the message), and only the characters its family allows (Debian policy
// 5.6.1/5.6.7/5.6.12; rpm's rpmCharCheck), so a file name made of them is
// safe.
Result<void> check_package_fields(const PackageInfo& info,
                                  const std::string& source);

// A kUsage error about package file `source` (its name escaped).
Error package_error(const std::string& source, const std::string& what);

}  // namespace gpunode
