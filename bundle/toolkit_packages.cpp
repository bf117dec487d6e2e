// read_package_info and package_arch (toolkit_packages.hpp): which format a
// file is (from its first bytes, never its name), and the checks on what
// either format says about itself.
#include "gpunode/toolkit_packages.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "gpunode/package_formats.hpp"
#include "gpunode/terminal_text.hpp"
#include "gpunode/unique_fd.hpp"
#include "gpunode/work_limits.hpp"

namespace gpunode {
namespace {

constexpr const char* kLayer = "bundle";
constexpr std::string_view kDebMagic = "!<arch>\ndebian-binary";
constexpr std::string_view kRpmMagic = "\xed\xab\xee\xdb";

Error read_error(const std::string& path, int err) {
  if (auto limit = out_of_resources(err, kLayer, "cannot read " + path))
    return *limit;
  return Error{ExitCode::kBlocked,
               kLayer,
               "cannot read " + terminal_safe(path) + ": " + std::strerror(err),
               {}};
}

bool alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

// True when every byte of `s` is alphanumeric or in `extra`.
bool only(const std::string& s, std::string_view extra) {
  for (char c : s) {
    if (!alnum(c) && extra.find(c) == std::string_view::npos) return false;
  }
  return true;
}

// What `field`'s value may be, or "" when it is fine.
std::string field_problem(const std::string& family, const std::string& field,
                          const std::string& v) {
  if (family == "deb") {
    // Debian policy 5.6.1: lowercase letters, digits, + - . and at least
    // two characters, starting with an alphanumeric.
    if (field == "name") {
      const bool lower_only =
          only(v, "+-.") &&
          v.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") == std::string::npos;
      return lower_only && v.size() >= 2 && alnum(v[0])
                 ? ""
                 : "is not a Debian package name";
    }
    // Policy 5.6.12: [epoch:]upstream[-revision], alphanumerics and . + ~ -
    // (':' only after the epoch), starting with a digit.
    if (field == "version") {
      const auto colon = v.find(':');
      const std::string epoch =
          colon == std::string::npos ? "" : v.substr(0, colon);
      const std::string rest =
          colon == std::string::npos ? v : v.substr(colon + 1);
      const bool epoch_ok =
          colon == std::string::npos ||
          (!epoch.empty() &&
           epoch.find_first_not_of("0123456789") == std::string::npos);
      return epoch_ok && !rest.empty() && rest[0] >= '0' && rest[0] <= '9' &&
                     only(rest, ".+~-")
                 ? ""
                 : "is not a Debian version";
    }
    // Policy 5.6.8 / dpkg-architecture(1): lowercase, digits and '-'.
    return only(v, "-") && v.find_first_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") ==
                               std::string::npos
               ? ""
               : "is not a Debian architecture";
  }
  // rpm's build/parseSpec.c: ALLOWED_CHARS_NAME ".-_+" (after macros) and
  // ALLOWED_CHARS_VERREL "._+~^" for VERSION and RELEASE, joined here by
  // one '-'; an arch is alphanumerics and '_' (x86_64, aarch64, noarch).
  if (field == "name") {
    return only(v, ".-_+") && alnum(v[0]) ? "" : "is not an rpm package name";
  }
  if (field == "version") {
    const auto dash = v.find('-');
    return dash != std::string::npos && dash > 0 && dash + 1 < v.size() &&
                   v.find('-', dash + 1) == std::string::npos &&
                   only(v.substr(0, dash), "._+~^") &&
                   only(v.substr(dash + 1), "._+~^")
               ? ""
               : "is not an rpm VERSION-RELEASE";
  }
  return only(v, "_") ? "" : "is not an rpm architecture";
}

}  // namespace

Error package_error(const std::string& source, const std::string& what) {
  return Error{ExitCode::kUsage, kLayer, terminal_safe(source) + ": " + what,
               "give the NVIDIA container toolkit's .deb or .rpm files as "
               "NVIDIA publishes them"};
}

PackageFormat sniff_package_format(std::string_view head) {
  if (head.substr(0, kDebMagic.size()) == kDebMagic) return PackageFormat::kDeb;
  if (head.substr(0, kRpmMagic.size()) == kRpmMagic) return PackageFormat::kRpm;
  return PackageFormat::kNeither;
}

Result<void> check_package_fields(const PackageInfo& info,
                                  const std::string& source) {
  for (auto [field, value] :
       {std::pair<const char*, const std::string*>{"name", &info.name},
        {"version", &info.version},
        {"arch", &info.arch}}) {
    for (unsigned char c : *value) {
      if (c < 0x20 || c == 0x7f) {
        return package_error(source, std::string("its ") + field +
                                         " holds a control character: \"" +
                                         terminal_safe(*value) + "\"");
      }
    }
    if (value->empty()) {
      return package_error(source, std::string("its ") + field + " is empty");
    }
    const std::string problem = field_problem(info.family, field, *value);
    if (!problem.empty()) {
      return package_error(source, std::string("its ") + field + " \"" +
                                       terminal_safe(*value) + "\" " + problem);
    }
  }
  return {};
}

Result<PackageInfo> read_package_info_bytes(std::string_view bytes,
                                            const std::string& source) {
  switch (sniff_package_format(bytes.substr(0, kPackageMagicBytes))) {
    case PackageFormat::kDeb:
      return read_deb_info_bytes(bytes, source);
    case PackageFormat::kRpm: {
      std::size_t at = 0;
      const ByteReader read = [&](std::size_t n) -> Result<std::string> {
        if (n > bytes.size() - at) {
          return package_error(source, "it is truncated");
        }
        std::string out(bytes.substr(at, n));
        at += n;
        return out;
      };
      return read_rpm_info(read, source);
    }
    case PackageFormat::kNeither:
      break;
  }
  return package_error(source, "it is neither a .deb nor an .rpm");
}

namespace {

// The first bytes of the package file open on `fd`, which decide its
// format. Not a regular file: kUsage.
Result<std::string> package_head(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return read_error(path, errno);
  if (!S_ISREG(st.st_mode)) {
    return package_error(path, "it is not a regular file");
  }
  std::string head(kPackageMagicBytes, '\0');
  const ssize_t got = ::pread(fd, head.data(), head.size(), 0);
  if (got < 0) return read_error(path, errno);
  head.resize(static_cast<std::size_t>(got));
  return head;
}

// O_NONBLOCK: opening a FIFO must not hang; fstat then refuses it.
Result<UniqueFd> open_package(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return read_error(path, errno);
  return fd;
}

}  // namespace

Result<PackageFormat> package_file_format(const std::string& path) {
  auto fd = open_package(path);
  if (!fd) return fd.error();
  auto head = package_head(fd->get(), path);
  if (!head) return head.error();
  return sniff_package_format(*head);
}

Result<PackageInfo> read_package_info(const std::string& path) {
  auto fd = open_package(path);
  if (!fd) return fd.error();
  return read_package_info_fd(fd->get(), path);
}

Result<PackageInfo> read_package_info_fd(int fd, const std::string& path) {
  auto head = package_head(fd, path);
  if (!head) return head.error();
  switch (sniff_package_format(*head)) {
    case PackageFormat::kDeb:
      return read_deb_info_fd(fd, path);
    case PackageFormat::kRpm: {
      const ByteReader read = [&](std::size_t n) -> Result<std::string> {
        std::string out(n, '\0');
        std::size_t done = 0;
        while (done < n) {
          const ssize_t r = ::read(fd, out.data() + done, n - done);
          if (r < 0 && errno == EINTR) continue;
          if (r < 0) return read_error(path, errno);
          if (r == 0) return package_error(path, "it is truncated");
          done += static_cast<std::size_t>(r);
        }
        return out;
      };
      return read_rpm_info(read, path);
    }
    case PackageFormat::kNeither:
      break;
  }
  return package_error(path, "it is neither a .deb nor an .rpm");
}

std::string package_arch(std::string_view family, std::string_view machine) {
  // uname -m's names; NVIDIA publishes the toolkit for these two only.
  if (machine == "x86_64") {
    return family == "deb" ? "amd64" : family == "rpm" ? "x86_64" : "";
  }
  if (machine == "aarch64") {
    return family == "deb" ? "arm64" : family == "rpm" ? "aarch64" : "";
  }
  return "";
}

}  // namespace gpunode
