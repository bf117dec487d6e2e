// A .deb's own metadata, read the way deb(5) lays it out: an ar archive
// whose members are, in this order, debian-binary ("2.x"), control.tar
// (plain, .gz, .xz or .zst) and data.tar; members whose names start with
// '_' may come between them and are ignored. Only control.tar is read (in
// memory, bounded), and in it only ./control, whose first stanza is parsed
// as deb-control(5) / deb822(5) says. What control.tar expands to, all of
// it, is bounded too: 9 MB of zstd can expand to 280 GiB.
#include <archive.h>
#include <archive_entry.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "gpunode/archive_handles.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/package_formats.hpp"
#include "gpunode/terminal_text.hpp"
#include "gpunode/work_limits.hpp"

namespace gpunode {
namespace {

// Real control.tar members are a few KiB (NVIDIA's: under 2 KiB); dpkg's own
// big ones (many md5sums) stay under a few MiB. Bounds memory on hostile
// input.
constexpr std::size_t kMaxControlTarBytes = 16u * 1024 * 1024;
constexpr std::size_t kMaxControlFileBytes = 1024u * 1024;
// What control.tar may expand to, every entry counted: generous for the
// largest real one (a few MiB), and reached in well under a second.
constexpr std::int64_t kMaxControlTarExpandedBytes = 64 * 1024 * 1024;
constexpr std::size_t kMaxDebianBinaryBytes = 4096;
constexpr std::size_t kBlockBytes = 64 * 1024;

std::string archive_message(archive* a) {
  const char* s = archive_error_string(a);
  return s ? s : "unknown libarchive error";
}

// A libarchive failure: a failed read(2) is the machine's (kBlocked; out of
// memory or descriptors kCannotRun), anything else the file's (kUsage).
Error archive_failure(archive* a, const std::string& source,
                      const std::string& what) {
  const int err = archive_errno(a);
  if (auto limit = out_of_resources(err, "bundle", "cannot read " + source))
    return *limit;
  if (err == EIO || err == EACCES) {
    return Error{
        ExitCode::kBlocked,
        "bundle",
        "cannot read " + terminal_safe(source) + ": " + archive_message(a),
        {}};
  }
  return package_error(source, what + ": " + archive_message(a));
}

// The current entry's data, at most `limit` bytes (more is refused).
Result<std::string> read_entry(archive* a, const std::string& source,
                               const std::string& name, std::size_t limit) {
  std::string out;
  char buf[8192];
  for (;;) {
    const la_ssize_t n = archive_read_data(a, buf, sizeof buf);
    if (n < 0) return archive_failure(a, source, "cannot read " + name);
    if (n == 0) return out;
    if (out.size() + static_cast<std::size_t>(n) > limit) {
      return package_error(source, name + " is larger than " +
                                       std::to_string(limit) +
                                       " bytes; no package's is");
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// deb(5): "If the major number has changed, an incompatible change has been
// made and the program should stop"; later lines and minor numbers are
// ignored.
Result<void> check_debian_binary(const std::string& text,
                                 const std::string& source) {
  const std::string first = text.substr(0, text.find('\n'));
  const auto dot = first.find('.');
  if (first.substr(0, dot) != "2" || dot == std::string::npos) {
    return package_error(source, "debian-binary says format \"" +
                                     terminal_safe(first) +
                                     "\"; only 2.x is known");
  }
  return {};
}

bool is_control_tar(const std::string& name) {
  return name == "control.tar" || name == "control.tar.gz" ||
         name == "control.tar.xz" || name == "control.tar.zst";
}

// Whether what control.tar expanded to so far passed the cap.
Result<void> check_expanded(archive* a, const std::string& member,
                            const std::string& source) {
  // Filter 0 is the last one applied: its count is the expanded bytes.
  if (archive_filter_bytes(a, 0) <= kMaxControlTarExpandedBytes) return {};
  return package_error(
      source, member + " expands to more than " +
                  std::to_string(kMaxControlTarExpandedBytes >> 20) +
                  " MiB (decompressing stopped there); no package's "
                  "control.tar is that large, and dpkg would unpack all of it");
}

// Reads past the current entry block by block (archive_read_data_skip
// would decompress all of it in one call), stopping when what control.tar
// expanded to passes the cap, or when gpunode is interrupted.
Result<void> skip_entry(archive* a, const std::string& member,
                        const std::string& source) {
  for (;;) {
    if (stop_requested()) return interrupted_error("bundle");
    if (auto ok = check_expanded(a, member, source); !ok) return ok.error();
    const void* block = nullptr;
    std::size_t size = 0;
    la_int64_t offset = 0;
    const int rc = archive_read_data_block(a, &block, &size, &offset);
    if (rc == ARCHIVE_EOF) return {};
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
      return archive_failure(a, source, "cannot read " + member);
  }
}

// ./control out of control.tar's bytes (any of deb(5)'s compressions). The
// cap counts every entry to the end of the archive, whatever their order:
// dpkg unpacks the whole control.tar on the node, so a pad after ./control
// costs as much as one before it.
Result<std::string> control_file(const std::string& tar,
                                 const std::string& member,
                                 const std::string& source) {
  ArchiveReadPtr a(archive_read_new());
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_xz(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), tar.data(), tar.size()) != ARCHIVE_OK) {
    return archive_failure(a.get(), source, member + " is not a tar");
  }
  std::optional<std::string> control;
  for (;;) {
    archive_entry* e = nullptr;
    const int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      return archive_failure(a.get(), source, "cannot read " + member);
    }
    const char* p = archive_entry_pathname(e);
    const std::string path = p ? p : "";
    if (control || (path != "./control" && path != "control")) {
      if (auto skipped = skip_entry(a.get(), member, source); !skipped)
        return skipped.error();
      continue;
    }
    if (archive_entry_filetype(e) != AE_IFREG) {
      return package_error(source, member + "'s control is not a file");
    }
    auto text = read_entry(a.get(), source, member + "'s control",
                           kMaxControlFileBytes);
    if (!text) return text.error();
    control = std::move(*text);
  }
  if (auto ok = check_expanded(a.get(), member, source); !ok) return ok.error();
  if (!control) return package_error(source, member + " holds no control file");
  return *control;
}

Result<PackageInfo> read_deb(archive* a, const std::string& source) {
  // 0: expecting debian-binary, 1: expecting control.tar.
  int want = 0;
  for (;;) {
    archive_entry* e = nullptr;
    const int rc = archive_read_next_header(a, &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      return archive_failure(a, source, "not a readable .deb");
    }
    const char* p = archive_entry_pathname(e);
    const std::string name = p ? p : "";
    if (want == 0) {
      if (name != "debian-binary") {
        return package_error(source, "its first member is \"" +
                                         terminal_safe(name) +
                                         "\", not debian-binary");
      }
      auto text = read_entry(a, source, "debian-binary", kMaxDebianBinaryBytes);
      if (!text) return text.error();
      if (auto ok = check_debian_binary(*text, source); !ok) return ok.error();
      want = 1;
      continue;
    }
    if (!name.empty() && name.front() == '_') continue;  // deb(5): ignored
    if (!is_control_tar(name)) {
      return package_error(source, "its second member is \"" +
                                       terminal_safe(name) +
                                       "\", not control.tar[.gz|.xz|.zst]");
    }
    auto tar = read_entry(a, source, name, kMaxControlTarBytes);
    if (!tar) return tar.error();
    auto control = control_file(*tar, name, source);
    if (!control) return control.error();
    return parse_deb_control(*control, source);
  }
  return package_error(source, want == 0 ? "it is an empty ar archive"
                                         : "it has no control.tar member");
}

ArchiveReadPtr new_ar_reader() {
  ArchiveReadPtr a(archive_read_new());
  archive_read_support_format_ar(a.get());
  return a;
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// deb822(5) ignores SPACE and TAB around a value, nothing else: a CR must
// stay for check_package_fields to refuse (a general trim would drop it).
std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

Result<PackageInfo> read_deb_info_fd(int fd, const std::string& source) {
  ArchiveReadPtr a = new_ar_reader();
  if (archive_read_open_fd(a.get(), fd, kBlockBytes) != ARCHIVE_OK) {
    return archive_failure(a.get(), source, "not a readable .deb");
  }
  return read_deb(a.get(), source);
}

Result<PackageInfo> read_deb_info_bytes(std::string_view bytes,
                                        const std::string& source) {
  ArchiveReadPtr a = new_ar_reader();
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) !=
      ARCHIVE_OK) {
    return archive_failure(a.get(), source, "not a readable .deb");
  }
  return read_deb(a.get(), source);
}

Result<PackageInfo> parse_deb_control(std::string_view text,
                                      const std::string& source) {
  // field name (lowercase: names are case-insensitive) -> value and whether
  // continuation lines followed it.
  struct Field {
    std::string value;
    bool continued = false;
  };
  std::map<std::string, Field> fields;
  Field* last = nullptr;
  std::size_t pos = 0;
  int line_no = 0;
  while (pos <= text.size()) {
    const auto nl = text.find('\n', pos);
    const std::string_view line = text.substr(
        pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    const std::string at = "control line " + std::to_string(line_no);
    if (blank(line)) {
      if (last) break;  // the end of the first stanza
      continue;         // blank lines before it
    }
    if (line.front() == ' ' || line.front() == '\t') {
      // deb822(5): a continuation line of the field before it.
      if (!last) return package_error(source, at + " continues no field");
      last->value += "\n" + std::string(line);
      last->continued = true;
      continue;
    }
    const auto colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    // deb822(5): a field name is US-ASCII from '!' to '~' without ':', not
    // starting with '#' or '-' (comments belong to debian/control only).
    bool name_ok = colon != std::string_view::npos && !name.empty() &&
                   name.front() != '#' && name.front() != '-';
    for (char c : name) name_ok = name_ok && c >= '!' && c <= '~';
    if (!name_ok) {
      return package_error(source, at + " is not a \"Field: value\" line: \"" +
                                       terminal_safe(line) + "\"");
    }
    auto [it, fresh] = fields.emplace(lower(name), Field{});
    if (!fresh) {
      return package_error(source,
                           at + " repeats the field " + std::string(name));
    }
    it->second.value = std::string(trim(line.substr(colon + 1)));
    last = &it->second;
  }
  PackageInfo info;
  info.family = "deb";
  for (auto [key, dest] :
       {std::pair<const char*, std::string*>{"Package", &info.name},
        {"Version", &info.version},
        {"Architecture", &info.arch}}) {
    const auto it = fields.find(lower(key));
    if (it == fields.end() || it->second.value.empty()) {
      return package_error(source,
                           std::string("its control file has no ") + key);
    }
    // deb-control(5): these are simple fields, one line each.
    if (it->second.continued) {
      return package_error(source, std::string("its control field ") + key +
                                       " spans lines: \"" +
                                       terminal_safe(it->second.value) + "\"");
    }
    *dest = it->second.value;
  }
  if (auto ok = check_package_fields(info, source); !ok) return ok.error();
  return info;
}

}  // namespace gpunode
