// An .rpm's own metadata, parsed natively so the connected side needs no rpm
// binary. The layout (rpm.org, docs/manual/format.md; lib/header.c):
//   lead       96 bytes, magic ed ab ee db, major version, ..., signature
//              type 5 (a header-style signature) at offset 78
//   signature  a header structure, padded to a multiple of 8 bytes
//   header     a header structure: the package's tags
//   payload    (not read)
// A header structure is magic 8e ad e8 01, 4 reserved bytes, the index
// count il and the data size dl (big-endian 32 bits each), il index entries
// of 16 bytes (tag, type, offset, count) and dl bytes of data. Every count,
// size and offset is bounded before it is used: the file may be hostile.
#include <cstdint>
#include <set>
#include <string>

#include "gpunode/package_formats.hpp"

namespace gpunode {
namespace {

constexpr std::size_t kLeadBytes = 96;
constexpr std::size_t kIntroBytes = 16;
constexpr std::size_t kEntryBytes = 16;
// lib/header_internal.h: hdrchkTags allows at most 0xffff index entries.
constexpr std::uint32_t kMaxIndexCount = 0xffff;
// Tighter than rpm's HEADER_DATA_MAX (256 MiB): NVIDIA's toolkit headers are
// a few KiB, the largest distribution packages' a few MiB; this bounds the
// memory a hostile file can make us allocate.
constexpr std::uint32_t kMaxDataBytes = 16u * 1024 * 1024;
constexpr int kSignatureTypeHeader = 5;  // RPMSIGTYPE_HEADERSIG
// lib/rpmtag.h
constexpr std::uint32_t kTagName = 1000;
constexpr std::uint32_t kTagVersion = 1001;
constexpr std::uint32_t kTagRelease = 1002;
constexpr std::uint32_t kTagArch = 1022;
constexpr std::uint32_t kTagSourceRpm = 1044;  // absent: a source package
constexpr std::uint32_t kTypeString = 6;       // RPM_STRING_TYPE

std::uint32_t be32(const std::string& s, std::size_t at) {
  return (std::uint32_t{static_cast<unsigned char>(s[at])} << 24) |
         (std::uint32_t{static_cast<unsigned char>(s[at + 1])} << 16) |
         (std::uint32_t{static_cast<unsigned char>(s[at + 2])} << 8) |
         std::uint32_t{static_cast<unsigned char>(s[at + 3])};
}

struct HeaderBlob {
  std::uint32_t il = 0;
  std::uint32_t dl = 0;
  std::string body;  // il entries, then dl bytes of data
};

// One header structure, its counts checked before its body is read.
Result<HeaderBlob> read_header(const ByteReader& read,
                               const std::string& source,
                               const std::string& which) {
  auto intro = read(kIntroBytes);
  if (!intro) return intro.error();
  if (intro->compare(0, 4, "\x8e\xad\xe8\x01", 4) != 0) {
    return package_error(source, "its " + which + " has no header magic");
  }
  HeaderBlob h;
  h.il = be32(*intro, 8);
  h.dl = be32(*intro, 12);
  if (h.il > kMaxIndexCount) {
    return package_error(source, "its " + which + " claims " +
                                     std::to_string(h.il) +
                                     " index entries; rpm allows at most " +
                                     std::to_string(kMaxIndexCount));
  }
  if (h.dl > kMaxDataBytes) {
    return package_error(
        source, "its " + which + " claims " + std::to_string(h.dl) +
                    " bytes of data; at most " + std::to_string(kMaxDataBytes) +
                    " are read");
  }
  auto body = read(std::size_t{h.il} * kEntryBytes + h.dl);
  if (!body) return body.error();
  h.body = std::move(*body);
  return h;
}

}  // namespace

Result<PackageInfo> read_rpm_info(const ByteReader& read,
                                  const std::string& source) {
  auto lead = read(kLeadBytes);
  if (!lead) return lead.error();
  if (lead->compare(0, 4, "\xed\xab\xee\xdb", 4) != 0) {
    return package_error(source, "it has no rpm lead magic");
  }
  if (static_cast<unsigned char>((*lead)[4]) < 3) {
    return package_error(
        source,
        "its rpm format " + std::to_string((*lead)[4]) + " is older than 3.0");
  }
  const int sig_type = (static_cast<unsigned char>((*lead)[78]) << 8) |
                       static_cast<unsigned char>((*lead)[79]);
  if (sig_type != kSignatureTypeHeader) {
    return package_error(source, "its lead names signature type " +
                                     std::to_string(sig_type) +
                                     "; only header signatures (5) are known");
  }
  auto sig = read_header(read, source, "signature header");
  if (!sig) return sig.error();
  // The signature is padded to a multiple of 8 bytes (format.md).
  const std::size_t sig_bytes = kIntroBytes + sig->body.size();
  if (const std::size_t pad = (8 - sig_bytes % 8) % 8; pad > 0) {
    if (auto p = read(pad); !p) return p.error();
  }
  auto h = read_header(read, source, "header");
  if (!h) return h.error();

  const std::size_t store = std::size_t{h->il} * kEntryBytes;
  PackageInfo info;
  info.family = "rpm";
  std::string version, release;
  bool binary = false;
  std::set<std::uint32_t> seen;
  for (std::uint32_t i = 0; i < h->il; ++i) {
    const std::size_t at = std::size_t{i} * kEntryBytes;
    const std::uint32_t tag = be32(h->body, at);
    std::string* dest = tag == kTagName      ? &info.name
                        : tag == kTagVersion ? &version
                        : tag == kTagRelease ? &release
                        : tag == kTagArch    ? &info.arch
                                             : nullptr;
    if (tag == kTagSourceRpm) binary = true;
    if (dest == nullptr) continue;
    const std::string tag_name = std::to_string(tag);
    if (!seen.insert(tag).second) {
      return package_error(source, "its header has tag " + tag_name + " twice");
    }
    const std::uint32_t type = be32(h->body, at + 4);
    const std::uint32_t offset = be32(h->body, at + 8);
    const std::uint32_t count = be32(h->body, at + 12);
    if (type != kTypeString || count != 1) {
      return package_error(source, "its header tag " + tag_name +
                                       " is not one string (type " +
                                       std::to_string(type) + ", count " +
                                       std::to_string(count) + ")");
    }
    // hdrchkRange: the offset lies inside the data; the string ends there.
    if (offset >= h->dl) {
      return package_error(source,
                           "its header tag " + tag_name + " points at offset " +
                               std::to_string(offset) + ", beyond the " +
                               std::to_string(h->dl) + " data bytes");
    }
    const auto nul = h->body.find('\0', store + offset);
    if (nul == std::string::npos) {
      return package_error(source, "its header tag " + tag_name +
                                       " runs past the end of the data");
    }
    *dest = h->body.substr(store + offset, nul - store - offset);
  }
  for (auto [tag, value] :
       {std::pair<const char*, const std::string*>{"NAME", &info.name},
        {"VERSION", &version},
        {"RELEASE", &release},
        {"ARCH", &info.arch}}) {
    if (value->empty()) {
      return package_error(source, std::string("its header has no ") + tag);
    }
  }
  if (!binary) {
    return package_error(source, "it is a source package (no SOURCERPM tag)");
  }
  // Epoch (tag 1003) is left out, as in the file names rpmbuild writes.
  info.version = version + "-" + release;
  // check_package_fields holds the joined version to one '-': VERSION and
  // RELEASE may hold none (rpmCharCheck), so it splits back unambiguously.
  if (auto ok = check_package_fields(info, source); !ok) return ok.error();
  return info;
}

}  // namespace gpunode
