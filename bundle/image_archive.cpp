// One streaming pass over an image archive with libarchive: every entry's
// name and type are checked, every regular file is hashed as it streams
// (nothing is extracted), small JSON documents are kept, and then the image
// graph (index -> manifests -> config + layers) is walked over what was seen.
#include "gpunode/image_archive.hpp"

#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "gpunode/archive_handles.hpp"
#include "gpunode/crash_point.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/work_limits.hpp"

namespace gpunode {
namespace {

using json = nlohmann::json;

// index.json, manifests and configs are kilobytes; anything past this is not
// one of them, so it is hashed but not kept.
constexpr std::size_t kKeepBytes = 4 * 1024 * 1024;
constexpr std::size_t kBlockBytes = 1024 * 1024;
constexpr const char* kMediaOciIndex =
    "application/vnd.oci.image.index.v1+json";
constexpr const char* kMediaDockerList =
    "application/vnd.docker.distribution.manifest.list.v2+json";

Error malformed(const std::string& path, const std::string& what) {
  return Error{
      ExitCode::kUsage, "image", path + ": " + what,
      "use the image archive from the bundle, made by `gpunode bundle create`, "
      "`ctr images export` or `skopeo copy ... oci-archive:FILE`"};
}
Error damaged(const std::string& path, const std::string& what) {
  return Error{ExitCode::kIntegrity, "image", path + ": " + what,
               "copy the archive again from a good source (the bundle on the "
               "USB stick may "
               "be damaged), then rerun gpunode install"};
}

struct Entry {
  std::uint64_t size = 0;
  std::string digest;  // "sha256:<hex>" of the content, when hashed
  std::optional<std::string> content;  // kept when small enough
  // A gzip member's trailer (RFC 1952, 2.3.1): ISIZE, the uncompressed size
  // modulo 2^32. Set when hashed content starts with gzip's magic.
  std::optional<std::uint32_t> gzip_isize;
};

struct Scan {
  std::map<std::string, Entry> entries;  // by normalised name
  bool compressed = false;
  std::uint64_t bytes_hashed = 0;
  std::uint64_t member_bytes = 0;  // sum of the regular members' sizes
};

// The first two and the last four bytes of a stream, for gzip_isize.
class Ends {
 public:
  void add(const unsigned char* p, std::size_t n) {
    for (std::size_t i = 0; i < n && head_n_ < 2; ++i) head_[head_n_++] = p[i];
    const std::size_t take = std::min<std::size_t>(n, 4);
    // Shift what is kept left by `take`, then append the newest bytes.
    for (std::size_t i = 0; i + take < 4; ++i) tail_[i] = tail_[i + take];
    for (std::size_t i = 0; i < take; ++i)
      tail_[4 - take + i] = p[n - take + i];
    total_ += n;
  }
  std::optional<std::uint32_t> gzip_isize() const {
    if (head_n_ < 2 || head_[0] != 0x1f || head_[1] != 0x8b || total_ < 18)
      return std::nullopt;  // 18: gzip's smallest member (header + trailer)
    return static_cast<std::uint32_t>(tail_[0]) |
           static_cast<std::uint32_t>(tail_[1]) << 8 |
           static_cast<std::uint32_t>(tail_[2]) << 16 |
           static_cast<std::uint32_t>(tail_[3]) << 24;
  }

 private:
  unsigned char head_[2] = {0, 0};
  std::size_t head_n_ = 0;
  unsigned char tail_[4] = {0, 0, 0, 0};
  std::uint64_t total_ = 0;
};

// Names ctr would write relative to its import root: no absolute paths, no
// "..", and "./x" is "x".
Result<std::string> safe_name(const std::string& path, const char* raw) {
  std::string name = raw == nullptr ? "" : raw;
  if (name.empty()) return malformed(path, "an entry has no name");
  if (name.front() == '/')
    return malformed(path, "entry '" + name + "' has an absolute path");
  while (name.rfind("./", 0) == 0) name.erase(0, 2);
  std::size_t i = 0;
  while (i <= name.size()) {
    std::size_t j = name.find('/', i);
    if (j == std::string::npos) j = name.size();
    if (name.compare(i, j - i, "..") == 0) {
      return malformed(path, "entry '" + std::string(raw) +
                                 "' climbs out of the archive (..)");
    }
    i = j + 1;
  }
  while (!name.empty() && name.back() == '/') name.pop_back();
  return name;
}

bool is_blob_name(const std::string& name, std::string* hex_out) {
  const std::string prefix = "blobs/sha256/";
  if (name.rfind(prefix, 0) != 0) return false;
  std::string h = name.substr(prefix.size());
  if (h.size() != 64 ||
      h.find_first_not_of("0123456789abcdef") != std::string::npos)
    return false;
  *hex_out = h;
  return true;
}

// Where an archive is read from: the file at `path`, else `bytes` or the
// open file `fd` when given (then `path` only names it in messages).
struct Source {
  const std::string& path;
  const std::string_view* bytes = nullptr;
  int fd = -1;
};

// Reads the archive once. `want_data(name)` says whether an entry's content
// is needed; with hashing on, every regular entry is read and hashed.
Result<Scan> scan_archive(
    const Source& source, bool hash_all,
    const std::function<bool(const std::string&)>& want_data,
    SteadyTime deadline) {
  const std::string& path = source.path;
  const std::string_view* bytes = source.bytes;
  const std::string doing = "verifying the image archive " + path;
  ArchiveReadPtr a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (source.fd >= 0) {
    // libarchive seeks over the data of a regular file it skips.
    if (archive_read_open_fd(a.get(), source.fd, kBlockBytes) != ARCHIVE_OK) {
      const char* why = archive_error_string(a.get());
      return malformed(path, std::string("not a tar archive (") +
                                 (why ? why : "unrecognised") + ")");
    }
  } else if (bytes != nullptr) {
    if (archive_read_open_memory(a.get(), bytes->data(), bytes->size()) !=
        ARCHIVE_OK) {
      const char* why = archive_error_string(a.get());
      return malformed(path, std::string("not a tar archive (") +
                                 (why ? why : "unrecognised") + ")");
    }
  } else if (archive_read_open_filename(a.get(), path.c_str(), kBlockBytes) !=
             ARCHIVE_OK) {
    const char* why = archive_error_string(a.get());
    // libarchive reads the first block to recognise the format while
    // opening: a file we can open but libarchive cannot read is not a tar.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (auto limit = out_of_resources(errno, "image",
                                        "cannot open image archive " + path))
        return *limit;
      return Error{
          ExitCode::kUsage, "image",
          "cannot read image archive " + path + ": " + std::strerror(errno),
          "check the path given with --image-archive"};
    }
    ::close(fd);
    return malformed(path, std::string("not a tar archive (") +
                               (why ? why : "unrecognised") + ")");
  }
  Scan scan;
  Sha256 sha;  // restarts after each entry's hex()
  // An archive in memory needs no buffer larger than itself (the fuzz
  // target reads thousands of small ones a second).
  std::vector<char> buf(bytes != nullptr
                            ? std::min(kBlockBytes, bytes->size() + 1)
                            : kBlockBytes);
  for (;;) {
    if (auto go = keep_going(deadline, "image", doing); !go) return go.error();
    archive_entry* e = nullptr;
    int rc = archive_read_next_header(a.get(), &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      const char* why = archive_error_string(a.get());
      std::string msg = why ? why : "unreadable";
      if (scan.entries.empty())
        return malformed(path, "not a tar archive (" + msg + ")");
      return damaged(path, "the archive is truncated or damaged after entry " +
                               std::to_string(scan.entries.size()) + " (" +
                               msg + ")");
    }
    if (scan.entries.empty()) {
      scan.compressed = archive_filter_count(a.get()) > 1;
    }
    // Tests stop or signal the run here
    // (common/include/gpunode/crash_point.hpp).
    crash_point("image-archive:entry");
    auto name = safe_name(path, archive_entry_pathname(e));
    if (!name) return name.error();
    const mode_t type = archive_entry_filetype(e);
    if (archive_entry_hardlink(e) != nullptr) {
      return malformed(path, "entry '" + *name +
                                 "' is a hard link; image archives have none");
    }
    if (type == AE_IFLNK) {
      return malformed(
          path,
          "entry '" + *name + "' is a symbolic link (to " +
              (archive_entry_symlink(e) ? archive_entry_symlink(e) : "?") +
              "); image archives have none");
    }
    if (type == AE_IFDIR) continue;
    if (type != AE_IFREG) {
      return malformed(path, "entry '" + *name + "' is not a regular file");
    }
    if (scan.entries.count(*name) != 0) {
      return malformed(path, "entry '" + *name + "' appears twice");
    }
    Entry entry;
    const bool keep = want_data(*name);
    if (hash_all || keep) {
      std::string kept;
      Ends ends;
      for (;;) {
        if (auto go = keep_going(deadline, "image", doing); !go)
          return go.error();
        la_ssize_t n = archive_read_data(a.get(), buf.data(), buf.size());
        if (n < 0) {
          const char* why = archive_error_string(a.get());
          return damaged(path, "entry '" + *name +
                                   "' is truncated or unreadable (" +
                                   (why ? why : "read error") + ")");
        }
        if (n == 0) break;
        sha.update(buf.data(), static_cast<std::size_t>(n));
        ends.add(reinterpret_cast<const unsigned char*>(buf.data()),
                 static_cast<std::size_t>(n));
        entry.size += static_cast<std::uint64_t>(n);
        if (keep && kept.size() + static_cast<std::size_t>(n) <= kKeepBytes) {
          kept.append(buf.data(), static_cast<std::size_t>(n));
        }
      }
      if (archive_entry_size_is_set(e) &&
          entry.size != static_cast<std::uint64_t>(archive_entry_size(e))) {
        return damaged(path, "entry '" + *name + "' is truncated");
      }
      entry.digest = "sha256:" + sha.hex();
      entry.gzip_isize = ends.gzip_isize();
      scan.bytes_hashed += entry.size;
      if (keep && entry.size <= kKeepBytes) entry.content = std::move(kept);
      std::string blob_hex;
      // A blob's name is its digest: a mismatch is damage, found here while
      // the entry streams by, before anything reaches containerd.
      if (hash_all && is_blob_name(*name, &blob_hex) &&
          entry.digest != "sha256:" + blob_hex) {
        return damaged(path, "blob " + *name +
                                 " is corrupt: its content hashes to " +
                                 entry.digest);
      }
    } else {
      entry.size = static_cast<std::uint64_t>(archive_entry_size(e));
      archive_read_data_skip(a.get());
    }
    scan.member_bytes += entry.size;
    scan.entries.emplace(*name, std::move(entry));
  }
  return scan;
}

struct Ref {
  std::string repo;
  std::string tag;
};
Ref split_ref(const std::string& ref) {
  const std::size_t slash = ref.rfind('/');
  const std::size_t colon = ref.rfind(':');
  if (colon != std::string::npos &&
      (slash == std::string::npos || colon > slash)) {
    return {ref.substr(0, colon), ref.substr(colon + 1)};
  }
  return {ref, "latest"};
}

// An OCI ref.name may be a full reference or just a tag (then ctr's
// --base-name supplies the repository).
bool names_ref(const std::string& name, const Ref& want) {
  if (name == want.repo + ":" + want.tag) return true;
  return name.find('/') == std::string::npos &&
         name.find(':') == std::string::npos && name == want.tag;
}

std::optional<json> parse_json(const Entry& e) {
  if (!e.content) return std::nullopt;
  json j = json::parse(*e.content, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// The string under `key` of a JSON object, else "". The documents come from
// the archive, so any field may have any type; nlohmann's value() throws on
// a wrong one, and an exception is no way to report a malformed archive.
std::string string_field(const json& j, const char* key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string platform_of(const json& p) {
  return string_field(p, "os") + "/" + string_field(p, "architecture");
}

// Layer and config media types that containerd unpacks (containerd
// images/mediatypes.go, IsLayerType and the config cases of images.Config):
// anything else imports, then fails inside `ctr` with no useful message.
bool is_layer_type(const std::string& media) {
  if (media.rfind("application/vnd.oci.image.layer.", 0) == 0) {
    return media.find("+encrypted") == std::string::npos;  // needs ocicrypt
  }
  return media == "application/vnd.docker.image.rootfs.diff.tar" ||
         media == "application/vnd.docker.image.rootfs.diff.tar.gzip" ||
         media == "application/vnd.docker.image.rootfs.diff.tar.zstd" ||
         media == "application/vnd.docker.image.rootfs.foreign.diff.tar" ||
         media == "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";
}
bool is_config_type(const std::string& media) {
  return media == "application/vnd.oci.image.config.v1+json" ||
         media == "application/vnd.docker.container.image.v1+json";
}

// What a layer takes once unpacked into a snapshot. An uncompressed layer
// is a tar: its files hold at most the tar's bytes (the tar adds a 512-byte
// header per file and padding; the file system adds up to a block per
// file, which the header mostly offsets). A gzip layer's trailer declares
// its tar's size modulo 2^32 (RFC 1952): taken as the smallest size at least
// the compressed one that matches it, exact below 4 GiB. A zstd layer's size
// is not declared anywhere we read: its compressed size is the (lower)
// estimate, and a disk that fills anyway is handled by the image stage.
std::uint64_t unpacked_size(const std::string& media, const Entry& e) {
  const bool gzip =
      media.size() >= 4 && (media.compare(media.size() - 4, 4, "gzip") == 0);
  if (!gzip || !e.gzip_isize) return e.size;
  std::uint64_t size = *e.gzip_isize;
  while (size < e.size) size += 1ull << 32;
  return size;
}

class OciWalk {
 public:
  OciWalk(const std::string& path, const Scan& scan, SteadyTime deadline)
      : path_(path), scan_(scan), deadline_(deadline) {}

  const Entry* blob(const std::string& digest) const {
    if (digest.rfind("sha256:", 0) != 0) return nullptr;
    auto it = scan_.entries.find("blobs/sha256/" + digest.substr(7));
    return it == scan_.entries.end() ? nullptr : &it->second;
  }

  // Checks a descriptor's blob is present with its size; returns it.
  Result<const Entry*> require(const json& desc, const std::string& what) {
    const std::string digest = string_field(desc, "digest");
    const Entry* e = blob(digest);
    if (e == nullptr) {
      return damaged(path_, what + " " + digest +
                                " is referenced but missing from the archive");
    }
    if (desc.contains("size") && desc["size"].is_number_unsigned() &&
        desc["size"].get<std::uint64_t>() != e->size) {
      return damaged(path_,
                     what + " " + digest + " should be " +
                         std::to_string(desc["size"].get<std::uint64_t>()) +
                         " bytes but is " + std::to_string(e->size));
    }
    return e;
  }

  // Walks an index or manifest descriptor; collects platforms and checks the
  // one for `platform` completely. Each document is walked at most once per
  // kind of platform hint (none, this node's, another; a descriptor's own
  // hint is recorded without a walk): an index that lists one child many
  // times, at every level, costs what its size does, not the product of
  // its fan-outs (issue 11, item 7).
  Result<void> walk(const json& desc, const std::string& platform,
                    std::string platform_hint, int depth) {
    if (depth > 4) return malformed(path_, "image indexes nest too deeply");
    if (auto go = keep_going(deadline_, "image",
                             "verifying the image archive " + path_);
        !go)
      return go;
    const std::string media = string_field(desc, "mediaType");
    if (desc.contains("platform") && desc["platform"].is_object()) {
      platform_hint = platform_of(desc["platform"]);
    }
    const std::string digest = string_field(desc, "digest");
    const Entry* e = blob(digest);
    if (e == nullptr && !platform_hint.empty() && platform_hint != platform) {
      // Single-platform exports (`ctr images export`) list every platform in
      // the index but carry only one; that is fine for the others.
      platforms_.insert(platform_hint + " (not included)");
      return {};
    }
    auto present =
        require(desc, media == kMediaOciIndex || media == kMediaDockerList
                          ? std::string("index")
                          : std::string("manifest"));
    if (!present) return present.error();
    const char kind = platform_hint.empty()       ? '0'
                      : platform_hint == platform ? '='
                                                  : '!';
    if (kind == '!') platforms_.insert(platform_hint);
    if (!walked_.insert(std::string(1, kind) + digest).second) return {};
    ++documents_walked_;
    auto doc = parse_json(**present);
    if (!doc)
      return malformed(path_, "blob " + digest + " is not a JSON document");
    if (doc->contains("manifests")) {
      if (!(*doc)["manifests"].is_array())
        return malformed(path_, "index " + digest + " has no manifest list");
      if ((*doc)["manifests"].empty())
        return malformed(path_, "index " + digest + " lists no manifests");
      for (const auto& m : (*doc)["manifests"]) {
        if (auto r = walk(m, platform, platform_hint, depth + 1); !r) return r;
      }
      return {};
    }
    // A manifest: its config says the platform when the index did not.
    if (!doc->contains("config") || !(*doc)["config"].is_object()) {
      return malformed(path_, "manifest " + digest + " has no config");
    }
    auto config = require((*doc)["config"], "config");
    if (!config) return config.error();
    std::optional<json> config_doc = parse_json(**config);
    std::string p = platform_hint;
    if (p.empty() && config_doc) p = platform_of(*config_doc);
    platforms_.insert(p);
    if (p != platform) return {};
    return check_image(digest, *doc, config_doc);
  }

  std::vector<std::string> platforms() const {
    return {platforms_.begin(), platforms_.end()};
  }
  bool found_platform() const { return found_platform_; }
  std::uint64_t unpacked_bytes() const { return unpacked_bytes_; }
  std::uint64_t documents_walked() const { return documents_walked_; }

 private:
  // The manifest for this node's platform: what containerd must be able to
  // unpack. Refused here rather than inside `ctr`: an image with no layers,
  // a layer or config of a type containerd does not unpack, and a config
  // whose rootfs.diff_ids do not pair with the layers.
  Result<void> check_image(const std::string& digest, const json& doc,
                           const std::optional<json>& config_doc) {
    const std::string config_media = string_field(doc["config"], "mediaType");
    if (!is_config_type(config_media)) {
      return malformed(path_, "manifest " + digest +
                                  " has a config of media type '" +
                                  config_media +
                                  "', not an image config containerd can run");
    }
    if (!doc.contains("layers") || !doc["layers"].is_array())
      return malformed(path_, "manifest " + digest + " has no layer list");
    const json& layers = doc["layers"];
    if (layers.empty())
      return malformed(path_, "manifest " + digest +
                                  " has no layers: there is nothing to run");
    for (const auto& layer : layers) {
      const std::string media = string_field(layer, "mediaType");
      if (!is_layer_type(media)) {
        return malformed(path_, "manifest " + digest + ": layer " +
                                    string_field(layer, "digest") +
                                    " has media type '" + media +
                                    "', which containerd cannot unpack");
      }
      auto r = require(layer, "layer");
      if (!r) return r.error();
      unpacked_bytes_ += unpacked_size(media, **r);
    }
    const json* diff_ids = nullptr;
    if (config_doc && config_doc->contains("rootfs") &&
        (*config_doc)["rootfs"].is_object() &&
        (*config_doc)["rootfs"].contains("diff_ids"))
      diff_ids = &(*config_doc)["rootfs"]["diff_ids"];
    if (diff_ids == nullptr || !diff_ids->is_array() ||
        diff_ids->size() != layers.size()) {
      return malformed(path_,
                       "manifest " + digest + " lists " +
                           std::to_string(layers.size()) +
                           " layers but its config's rootfs.diff_ids " +
                           (diff_ids && diff_ids->is_array()
                                ? "lists " + std::to_string(diff_ids->size())
                                : std::string("is missing")));
    }
    found_platform_ = true;
    return {};
  }

  const std::string& path_;
  const Scan& scan_;
  SteadyTime deadline_;
  std::set<std::string> platforms_;
  std::set<std::string> walked_;  // kind of hint + digest
  bool found_platform_ = false;
  std::uint64_t unpacked_bytes_ = 0;
  std::uint64_t documents_walked_ = 0;
};

bool is_metadata(const std::string& name) {
  return name == "index.json" || name == "oci-layout" ||
         name == "manifest.json";
}

std::string names_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

Result<ImageArchiveInfo> read_oci(const std::string& path, const Scan& scan,
                                  const Ref& want,
                                  const std::string& expected_ref,
                                  const std::string* platform,
                                  SteadyTime deadline) {
  auto index = parse_json(scan.entries.at("index.json"));
  if (!index || !(*index)["manifests"].is_array()) {
    return malformed(path, "index.json is not an OCI image index");
  }
  ImageArchiveInfo info;
  info.format = ImageArchiveInfo::Format::kOciLayout;
  std::vector<std::string> names;
  const json* chosen = nullptr;
  for (const auto& desc : (*index)["manifests"]) {
    if (!desc.is_object()) continue;
    const json annotations = desc.value("annotations", json::object());
    for (const char* key :
         {"io.containerd.image.name", "org.opencontainers.image.ref.name"}) {
      if (!annotations.contains(key) || !annotations[key].is_string()) continue;
      const std::string name = annotations[key].get<std::string>();
      names.push_back(name);
      if (chosen == nullptr && names_ref(name, want)) {
        chosen = &desc;
        info.name_in_archive = name;
      }
    }
  }
  if (chosen == nullptr) {
    return malformed(path, "holds no image named " + expected_ref +
                               " (it names: " + names_list(names) + ")");
  }
  info.ref = expected_ref;
  info.target_digest = string_field(*chosen, "digest");
  if (platform != nullptr) {
    OciWalk walk(path, scan, deadline);
    if (auto r = walk.walk(*chosen, *platform, "", 0); !r) return r.error();
    info.platforms = walk.platforms();
    info.unpacked_bytes = walk.unpacked_bytes();
    info.documents_walked = walk.documents_walked();
    if (!walk.found_platform()) {
      return malformed(path,
                       "has no image for this node's platform " + *platform +
                           " (it has: " + names_list(info.platforms) + ")");
    }
  }
  return info;
}

Result<ImageArchiveInfo> read_docker(const std::string& path, const Scan& scan,
                                     const Ref& want,
                                     const std::string& expected_ref,
                                     const std::string* platform) {
  json manifest = json::parse(
      scan.entries.at("manifest.json").content.value_or(""), nullptr, false);
  if (manifest.is_discarded() || !manifest.is_array()) {
    return malformed(path, "manifest.json is not a docker archive manifest");
  }
  std::vector<std::string> names;
  const json* chosen = nullptr;
  for (const auto& m : manifest) {
    if (!m.is_object() || !m.contains("RepoTags") || !m["RepoTags"].is_array())
      continue;
    for (const auto& t : m["RepoTags"]) {
      if (!t.is_string()) continue;
      names.push_back(t.get<std::string>());
      if (chosen == nullptr &&
          t.get<std::string>() == want.repo + ":" + want.tag)
        chosen = &m;
    }
  }
  if (chosen == nullptr) {
    return malformed(path, "holds no image named " + expected_ref +
                               " (it names: " + names_list(names) + ")");
  }
  ImageArchiveInfo info;
  info.format = ImageArchiveInfo::Format::kDockerArchive;
  info.ref = expected_ref;
  info.name_in_archive = expected_ref;
  const std::string config_name = string_field(*chosen, "Config");
  auto config_it = scan.entries.find(config_name);
  if (config_it == scan.entries.end()) {
    return damaged(path, "config " + config_name +
                             " is referenced but missing from the archive");
  }
  // Docker names the config after its digest ("<hex>.json" or a blob path).
  std::string stem = config_name.substr(config_name.rfind('/') + 1);
  if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".json") == 0)
    stem.resize(stem.size() - 5);
  const Entry& config_entry = config_it->second;
  if (platform == nullptr) {
    // Hashed when peeking too, unless its name does not end in .json.
    info.target_digest =
        config_entry.digest.empty() ? "sha256:" + stem : config_entry.digest;
    return info;
  }
  info.target_digest = config_entry.digest;
  if (stem.size() == 64 && config_entry.digest != "sha256:" + stem) {
    return damaged(path, "config " + config_name +
                             " is corrupt: its content hashes to " +
                             config_entry.digest);
  }
  auto config = parse_json(config_entry);
  if (!config) return malformed(path, "config " + config_name + " is not JSON");
  const std::string p = platform_of(*config);
  info.platforms = {p};
  if (p != *platform) {
    return malformed(path, "has no image for this node's platform " +
                               *platform + " (it has: " + p + ")");
  }
  const json layers = chosen->value("Layers", json::array());
  if (layers.is_array() && layers.empty()) {
    return malformed(path, "the image " + expected_ref +
                               " has no layers: there is nothing to run");
  }
  const auto rootfs = config->find("rootfs");
  const json diff_ids = rootfs != config->end() && rootfs->is_object()
                            ? rootfs->value("diff_ids", json::array())
                            : json::array();
  if (!layers.is_array() || !diff_ids.is_array() ||
      layers.size() != diff_ids.size()) {
    return malformed(
        path, "the layer list does not match the config's rootfs.diff_ids");
  }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string layer =
        layers[i].is_string() ? layers[i].get<std::string>() : "";
    auto it = scan.entries.find(layer);
    if (it == scan.entries.end()) {
      return damaged(path, "layer " + layer +
                               " is referenced but missing from the archive");
    }
    // Uncompressed layers hash to their diff_id; that is what ctr checks.
    if (diff_ids[i].is_string() &&
        it->second.digest != diff_ids[i].get<std::string>()) {
      return damaged(path, "layer " + layer + " is corrupt: it hashes to " +
                               it->second.digest + ", the config says " +
                               diff_ids[i].get<std::string>());
    }
    // A docker archive's layers are plain tars (they hash to their
    // diff_ids): what they unpack to is bounded by their size.
    info.unpacked_bytes += it->second.size;
  }
  return info;
}

Result<ImageArchiveInfo> read_archive(const Source& source,
                                      const std::string& expected_ref,
                                      const std::string* platform,
                                      SteadyTime deadline) {
  const std::string& path = source.path;
  const bool verify = platform != nullptr;
  // With verification every entry is read anyway; keep the small ones
  // (manifests and configs are blobs too). Peeking keeps only the metadata
  // and a docker archive's configs (<hex>.json, kilobytes): an image's
  // identity is its config's digest, which a config not named after it
  // gives only by hashing.
  auto scan = scan_archive(
      source, verify,
      [&](const std::string& name) {
        const bool json_doc =
            name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
        return is_metadata(name) || (verify && name.rfind("blobs/", 0) == 0) ||
               (json_doc && (verify || name.find('/') == std::string::npos));
      },
      deadline);
  if (!scan) return scan.error();
  const Ref want = split_ref(expected_ref);
  Result<ImageArchiveInfo> info = Error{};
  if (scan->entries.count("index.json") != 0) {
    info = read_oci(path, *scan, want, expected_ref, platform, deadline);
  } else if (scan->entries.count("manifest.json") != 0) {
    info = read_docker(path, *scan, want, expected_ref, platform);
  } else {
    return malformed(
        path,
        "has neither index.json (OCI image layout) nor manifest.json "
        "(docker archive)");
  }
  if (!info) return info;
  info->compressed = scan->compressed;
  info->bytes_verified = scan->bytes_hashed;
  info->entries = scan->entries.size();
  info->stored_bytes = scan->member_bytes;
  return info;
}

}  // namespace

std::string host_platform() {
  utsname u{};
  ::uname(&u);
  const std::string m = u.machine;
  if (m == "aarch64" || m == "arm64") return "linux/arm64";
  if (m == "x86_64" || m == "amd64") return "linux/amd64";
  return "linux/" + m;
}

Result<ImageArchiveInfo> peek_image_archive(const std::string& path,
                                            const std::string& expected_ref) {
  return read_archive({path}, expected_ref, nullptr, kNoDeadline);
}

Result<ImageArchiveInfo> peek_image_archive_fd(
    int fd, const std::string& name, const std::string& expected_ref) {
  return read_archive({name, nullptr, fd}, expected_ref, nullptr, kNoDeadline);
}

Result<ImageArchiveInfo> verify_image_archive(const std::string& path,
                                              const std::string& expected_ref,
                                              const std::string& platform,
                                              SteadyTime deadline) {
  return read_archive({path}, expected_ref, &platform, deadline);
}

Result<ImageArchiveInfo> peek_image_archive_bytes(
    std::string_view bytes, const std::string& name,
    const std::string& expected_ref) {
  return read_archive({name, &bytes}, expected_ref, nullptr, kNoDeadline);
}

Result<ImageArchiveInfo> verify_image_archive_bytes(
    std::string_view bytes, const std::string& name,
    const std::string& expected_ref, const std::string& platform,
    SteadyTime deadline) {
  return read_archive({name, &bytes}, expected_ref, &platform, deadline);
}

struct DecompressedStream::Impl {
  ArchiveReadPtr a{archive_read_new()};
  std::vector<char> buf = std::vector<char>(kBlockBytes);
  std::optional<Error> open_error;
  bool done = false;
};

DecompressedStream::DecompressedStream(const std::string& path)
    : impl_(new Impl) {
  // The "raw" format yields the decompressed bytes of the whole file.
  archive_read_support_filter_all(impl_->a.get());
  archive_read_support_format_raw(impl_->a.get());
  archive_entry* e = nullptr;
  if (archive_read_open_filename(impl_->a.get(), path.c_str(), kBlockBytes) !=
          ARCHIVE_OK ||
      archive_read_next_header(impl_->a.get(), &e) != ARCHIVE_OK) {
    const char* why = archive_error_string(impl_->a.get());
    impl_->open_error =
        damaged(path, std::string("cannot read: ") + (why ? why : "?"));
  }
}

DecompressedStream::~DecompressedStream() { delete impl_; }

Result<std::string_view> DecompressedStream::next() {
  if (impl_->open_error) return *impl_->open_error;
  if (impl_->done) return std::string_view();
  la_ssize_t n =
      archive_read_data(impl_->a.get(), impl_->buf.data(), impl_->buf.size());
  if (n < 0) {
    const char* why = archive_error_string(impl_->a.get());
    return Error{
        ExitCode::kIntegrity, "image",
        std::string("the image archive became unreadable while importing: ") +
            (why ? why : "read error"),
        "check the USB stick, copy the archive again, and rerun gpunode "
        "install"};
  }
  if (n == 0) impl_->done = true;
  return std::string_view(impl_->buf.data(), static_cast<std::size_t>(n));
}

}  // namespace gpunode
