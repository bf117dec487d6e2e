#include "oci_builder.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "gpunode/archive_handles.hpp"
#include "gpunode/digest.hpp"

namespace gpunode::test {
namespace {

using Json = nlohmann::json;
using ByteFn = std::function<void(const char*, std::size_t)>;

constexpr const char* kIndexType = "application/vnd.oci.image.index.v1+json";
constexpr const char* kManifestType =
    "application/vnd.oci.image.manifest.v1+json";
constexpr const char* kConfigType = "application/vnd.oci.image.config.v1+json";
constexpr const char* kLayerType = "application/vnd.oci.image.layer.v1.tar";
constexpr const char* kRefNameKey = "org.opencontainers.image.ref.name";
constexpr std::int64_t kMtime = 1700000000;  // fixed: output is deterministic
constexpr std::size_t kChunk = 64 * 1024;
constexpr std::size_t kTarHeader = 512;

[[noreturn]] void fail(archive* a, const std::string& what) {
  const char* msg = a != nullptr ? archive_error_string(a) : nullptr;
  throw std::runtime_error("oci_builder: " + what + ": " +
                           (msg != nullptr ? msg : "unknown error"));
}

void check(archive* a, int rc, const std::string& what) {
  if (rc < ARCHIVE_WARN) fail(a, what);
}

ArchiveWritePtr new_writer() {
  ArchiveWritePtr a(archive_write_new());
  if (!a) throw std::runtime_error("oci_builder: archive_write_new failed");
  return a;
}

ArchiveEntryPtr new_entry(const std::string& name, unsigned type, unsigned perm,
                          std::int64_t size) {
  ArchiveEntryPtr e(archive_entry_new());
  if (!e) throw std::runtime_error("oci_builder: archive_entry_new failed");
  archive_entry_set_pathname(e.get(), name.c_str());
  archive_entry_set_filetype(e.get(), type);
  archive_entry_set_perm(e.get(), perm);
  archive_entry_set_size(e.get(), size);
  archive_entry_set_mtime(e.get(), kMtime, 0);
  archive_entry_set_uid(e.get(), 0);
  archive_entry_set_gid(e.get(), 0);
  return e;
}

// Deterministic pseudo-random bytes (splitmix64), the same on every host.
class Prng {
 public:
  explicit Prng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  void fill(char* p, std::size_t n) {
    while (n > 0) {
      std::uint64_t v = next();
      for (int i = 0; i < 8 && n > 0; ++i, --n) {
        *p++ = static_cast<char>(v & 0xFF);
        v >>= 8;
      }
    }
  }

 private:
  std::uint64_t state_;
};

// libarchive write callback that hands the bytes to a ByteFn. Exceptions
// must not cross libarchive's C frames: they are parked and rethrown.
struct CallbackSink {
  const ByteFn* fn;
  std::exception_ptr error;
};

la_ssize_t sink_write(archive*, void* client, const void* buf, std::size_t n) {
  auto* sink = static_cast<CallbackSink*>(client);
  try {
    (*sink->fn)(static_cast<const char*>(buf), n);
  } catch (...) {
    sink->error = std::current_exception();
    return -1;
  }
  return static_cast<la_ssize_t>(n);
}

void rethrow_or_fail(archive* a, const CallbackSink& sink,
                     const std::string& what) {
  if (sink.error) std::rethrow_exception(sink.error);
  fail(a, what);
}

// One platform's layer: an uncompressed tar (made by libarchive, ordinary
// 10240-byte blocking) holding one regular file of pseudo-random bytes.
// Streamed in chunks to `out`; never held whole.
struct LayerSource {
  std::uint64_t seed = 0;
  std::size_t file_bytes = 0;

  void stream(const ByteFn& out) const {
    CallbackSink sink{&out, nullptr};
    ArchiveWritePtr a = new_writer();
    check(a.get(), archive_write_set_format_pax_restricted(a.get()),
          "layer format");
    if (archive_write_open(a.get(), &sink, nullptr, &sink_write, nullptr) !=
        ARCHIVE_OK)
      rethrow_or_fail(a.get(), sink, "layer open");
    ArchiveEntryPtr e = new_entry("payload.bin", AE_IFREG, 0644,
                                  static_cast<std::int64_t>(file_bytes));
    if (archive_write_header(a.get(), e.get()) < ARCHIVE_WARN)
      rethrow_or_fail(a.get(), sink, "layer header");
    Prng prng(seed);
    std::string buf(std::min(kChunk, file_bytes), '\0');
    for (std::size_t left = file_bytes; left > 0;) {
      const std::size_t k = std::min(left, buf.size());
      prng.fill(buf.data(), k);
      if (archive_write_data(a.get(), buf.data(), k) < 0)
        rethrow_or_fail(a.get(), sink, "layer data");
      left -= k;
    }
    if (archive_write_close(a.get()) != ARCHIVE_OK)
      rethrow_or_fail(a.get(), sink, "layer close");
  }
};

// A blob of the archive: small JSON held in memory, or a streamed layer.
struct Blob {
  std::string name;  // entry name in the archive
  std::string hex;   // sha256 of the true content
  std::uint64_t size = 0;
  std::string text;  // content when not a layer
  const LayerSource* layer = nullptr;
  // Damage applied while writing it (offsets into the blob's data).
  std::int64_t flip_at = -1;  // this byte is written inverted
  std::int64_t cut_at = -1;   // the archive ends here
};

Blob text_blob(std::string text) {
  Blob b;
  b.hex = sha256_hex(text);
  b.size = text.size();
  b.text = std::move(text);
  return b;
}

Blob layer_blob(const LayerSource& layer) {
  Sha256 h;
  Blob b;
  layer.stream([&](const char* p, std::size_t n) {
    h.update(p, n);
    b.size += n;
  });
  b.hex = h.hex();
  if (b.hex.empty()) throw std::runtime_error("oci_builder: sha256 failed");
  b.layer = &layer;
  return b;
}

// Where the outer tar's bytes go: the file itself, or a compressor
// (libarchive's "raw" format behind a gzip/zstd filter) that writes the
// file. stop() drops every later byte: the archive is cut there.
class OutputSink {
 public:
  OutputSink(const std::string& path, Compression compression) : path_(path) {
    if (compression == Compression::kNone) {
      file_.open(path, std::ios::binary | std::ios::trunc);
      if (!file_) throw std::runtime_error("oci_builder: cannot write " + path);
      return;
    }
    compressor_ = new_writer();
    archive* a = compressor_.get();
    if (compression == Compression::kGzip) {
      check(a, archive_write_add_filter_gzip(a), "gzip filter");
      // No time stamp in the gzip header: output stays deterministic.
      check(a, archive_write_set_filter_option(a, "gzip", "timestamp", nullptr),
            "gzip options");
    } else {
      check(a, archive_write_add_filter_zstd(a), "zstd filter");
    }
    check(a, archive_write_set_format_raw(a), "raw format");
    check(a, archive_write_set_bytes_in_last_block(a, 1), "block size");
    check(a, archive_write_open_filename(a, path.c_str()), "open " + path);
    ArchiveEntryPtr e = new_entry("image.tar", AE_IFREG, 0644, 0);
    check(a, archive_write_header(a, e.get()), "compressor header");
  }

  void write(const char* p, std::size_t n) {
    if (stopped_ || n == 0) return;
    if (compressor_) {
      if (archive_write_data(compressor_.get(), p, n) < 0)
        fail(compressor_.get(), "compress");
    } else {
      file_.write(p, static_cast<std::streamsize>(n));
      if (!file_)
        throw std::runtime_error("oci_builder: cannot write " + path_);
    }
  }
  void stop() { stopped_ = true; }

  void close() {
    if (compressor_) {
      check(compressor_.get(), archive_write_close(compressor_.get()),
            "close " + path_);
    } else {
      file_.close();
      if (!file_)
        throw std::runtime_error("oci_builder: cannot write " + path_);
    }
  }

 private:
  std::string path_;
  std::ofstream file_;
  ArchiveWritePtr compressor_;
  bool stopped_ = false;
};

// The outer tar (pax restricted: plain ustar unless a name needs more).
// No blocking, so every byte reaches the sink as soon as it is written and
// a cut lands exactly where asked.
class TarWriter {
 public:
  explicit TarWriter(OutputSink& out)
      : fn_([&out](const char* p, std::size_t n) { out.write(p, n); }),
        sink_{&fn_, nullptr},
        a_(new_writer()) {
    check(a_.get(), archive_write_set_format_pax_restricted(a_.get()),
          "tar format");
    check(a_.get(), archive_write_set_bytes_per_block(a_.get(), 0),
          "tar blocking");
    if (archive_write_open(a_.get(), &sink_, nullptr, &sink_write, nullptr) !=
        ARCHIVE_OK)
      rethrow_or_fail(a_.get(), sink_, "tar open");
  }

  void dir(const std::string& name) {
    header(new_entry(name, AE_IFDIR, 0755, 0), name);
  }
  void symlink(const std::string& name, const std::string& target) {
    ArchiveEntryPtr e = new_entry(name, AE_IFLNK, 0777, 0);
    archive_entry_set_symlink(e.get(), target.c_str());
    header(std::move(e), name);
  }
  void hardlink(const std::string& name, const std::string& target) {
    ArchiveEntryPtr e = new_entry(name, AE_IFREG, 0644, 0);
    archive_entry_set_hardlink(e.get(), target.c_str());
    header(std::move(e), name);
  }
  void file(const std::string& name, const std::string& content) {
    header(new_entry(name, AE_IFREG, 0644,
                     static_cast<std::int64_t>(content.size())),
           name);
    data(content.data(), content.size());
  }
  void begin_file(const std::string& name, std::uint64_t size) {
    header(new_entry(name, AE_IFREG, 0644, static_cast<std::int64_t>(size)),
           name);
  }
  void data(const char* p, std::size_t n) {
    if (n > 0 && archive_write_data(a_.get(), p, n) < 0)
      rethrow_or_fail(a_.get(), sink_, "tar data");
  }
  void close() {
    if (archive_write_close(a_.get()) != ARCHIVE_OK)
      rethrow_or_fail(a_.get(), sink_, "tar close");
  }

 private:
  void header(ArchiveEntryPtr e, const std::string& name) {
    if (archive_write_header(a_.get(), e.get()) < ARCHIVE_WARN)
      rethrow_or_fail(a_.get(), sink_, "tar header " + name);
  }

  ByteFn fn_;
  CallbackSink sink_;
  ArchiveWritePtr a_;
};

// Writes one blob's data, applying its flip/cut.
void write_blob(TarWriter& tar, OutputSink& out, const Blob& blob) {
  tar.begin_file(blob.name, blob.size);
  std::uint64_t pos = 0;
  std::string scratch;
  auto emit = [&](const char* p, std::size_t n) {
    const std::uint64_t end = pos + n;
    if (blob.flip_at >= 0 && static_cast<std::uint64_t>(blob.flip_at) >= pos &&
        static_cast<std::uint64_t>(blob.flip_at) < end) {
      scratch.assign(p, n);
      char& c = scratch[static_cast<std::size_t>(blob.flip_at) - pos];
      c = static_cast<char>(~c);
      p = scratch.data();
    }
    if (blob.cut_at >= 0 && static_cast<std::uint64_t>(blob.cut_at) >= pos &&
        static_cast<std::uint64_t>(blob.cut_at) < end) {
      const std::size_t head = static_cast<std::size_t>(blob.cut_at - pos);
      tar.data(p, head);
      out.stop();
      tar.data(p + head, n - head);
    } else {
      tar.data(p, n);
    }
    pos = end;
  };
  if (blob.layer != nullptr) {
    blob.layer->stream(emit);
  } else {
    // In pieces, so a cut in a text blob lands where asked too.
    for (std::size_t i = 0; i < blob.text.size(); i += kChunk)
      emit(blob.text.data() + i, std::min(kChunk, blob.text.size() - i));
  }
  if (pos != blob.size)
    throw std::logic_error("oci_builder: blob " + blob.name + " changed size");
}

struct Platform {
  std::string text, os, arch, variant;
  Json json() const {
    Json j = {{"architecture", arch}, {"os", os}};
    if (!variant.empty()) j["variant"] = variant;
    return j;
  }
};

Platform parse_platform(const std::string& text) {
  Platform p;
  p.text = text;
  std::vector<std::string> parts;
  std::size_t i = 0;
  for (;;) {
    std::size_t j = text.find('/', i);
    parts.push_back(text.substr(i, j == std::string::npos ? j : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  if (parts.size() < 2 || parts.size() > 3 || parts[0].empty() ||
      parts[1].empty())
    throw std::invalid_argument("oci_builder: bad platform \"" + text + "\"");
  p.os = parts[0];
  p.arch = parts[1];
  if (parts.size() == 3) p.variant = parts[2];
  return p;
}

std::string digest(const std::string& hex) { return "sha256:" + hex; }

// A digest that is no blob's: what a damaged manifest references.
std::string wrong_hex(const std::string& hex) {
  return sha256_hex("gpunode-test: not the blob " + hex);
}

// Extra hostile entries, written before the blobs.
void write_extras(TarWriter& tar, Damage damage) {
  switch (damage) {
    case Damage::kPathTraversal:
      tar.file("../evil", "evil\n");
      break;
    case Damage::kAbsolutePath:
      tar.file("/etc/evil", "evil\n");
      break;
    case Damage::kSymlinkEntry:
      tar.symlink("blobs/sha256/link", "/etc/passwd");
      break;
    case Damage::kHardlinkEntry:
      tar.hardlink("blobs/sha256/hardlink", "/etc/passwd");
      break;
    default:
      break;
  }
}

// kTruncated: the archive ends halfway through the largest blob's data.
void mark_cut(std::vector<Blob*>& blobs) {
  Blob* largest = nullptr;
  for (Blob* b : blobs) {
    if (largest == nullptr || b->size > largest->size) largest = b;
  }
  if (largest != nullptr)
    largest->cut_at = static_cast<std::int64_t>(largest->size / 2);
}

// The byte flipped by kCorruptLayer: inside the payload file when it has
// one, else in the layer's tar header.
std::int64_t flip_offset(const LayerSource& layer) {
  return layer.file_bytes > 0
             ? static_cast<std::int64_t>(kTarHeader + layer.file_bytes / 2)
             : 0;
}

std::uint64_t layer_seed(std::uint32_t seed, std::size_t platform_index) {
  Prng mix((static_cast<std::uint64_t>(seed) << 32) ^ (platform_index + 1));
  return mix.next();
}

void write_not_a_tar(const std::string& path, const ImageSpec& spec) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("oci_builder: cannot write " + path);
  Prng prng(layer_seed(spec.seed, 999));
  std::string buf(kChunk, '\0');
  bool first = true;
  for (std::size_t left = std::max<std::size_t>(spec.layer_bytes, 1024);
       left > 0;) {
    const std::size_t k = std::min(left, buf.size());
    prng.fill(buf.data(), k);
    // Not even a plausible start of a tar header, nor of a gzip/zstd stream.
    if (first) buf[0] = '\xff';
    first = false;
    f.write(buf.data(), static_cast<std::streamsize>(k));
    left -= k;
  }
  f.close();
  if (!f) throw std::runtime_error("oci_builder: cannot write " + path);
}

std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw std::runtime_error("oci_builder: cannot stat " + path);
  return static_cast<std::uint64_t>(st.st_size);
}

BuiltImage build_oci(const std::string& path, const ImageSpec& spec,
                     const std::vector<Platform>& platforms,
                     Compression compression, Damage damage) {
  BuiltImage built;
  built.path = path;
  const std::size_t n = platforms.size();
  std::vector<LayerSource> sources(n);
  std::vector<Blob> layers, configs, manifests;
  layers.reserve(n);
  configs.reserve(n);
  manifests.reserve(n);
  Json index_manifests = Json::array();
  for (std::size_t i = 0; i < n; ++i) {
    const Platform& p = platforms[i];
    sources[i] = LayerSource{layer_seed(spec.seed, i), spec.layer_bytes};
    layers.push_back(layer_blob(sources[i]));
    Blob& layer = layers.back();
    Json config = p.json();
    config["config"] = Json::object();
    config["rootfs"] = {{"type", "layers"},
                        {"diff_ids", Json::array({digest(layer.hex)})}};
    configs.push_back(text_blob(config.dump()));
    const Blob& cfg = configs.back();

    Json layer_desc = {{"mediaType", kLayerType},
                       {"digest", digest(layer.hex)},
                       {"size", layer.size}};
    if (i == 0 && damage == Damage::kManifestDigestMismatch)
      layer_desc["digest"] = digest(wrong_hex(layer.hex));
    if (i == 0 && damage == Damage::kSizeMismatch)
      layer_desc["size"] = layer.size + 1;
    const Json manifest = {{"schemaVersion", 2},
                           {"mediaType", kManifestType},
                           {"config",
                            {{"mediaType", kConfigType},
                             {"digest", digest(cfg.hex)},
                             {"size", cfg.size}}},
                           {"layers", Json::array({layer_desc})}};
    manifests.push_back(text_blob(manifest.dump()));
    const Blob& m = manifests.back();
    built.manifest_digests[p.text] = digest(m.hex);
    built.layer_digests[p.text] = digest(layer.hex);
    index_manifests.push_back({{"mediaType", kManifestType},
                               {"digest", digest(m.hex)},
                               {"size", m.size},
                               {"platform", p.json()}});
  }

  std::vector<Blob> index_blob;  // the nested index, when there is one
  Json top = index_manifests[0];
  if (n > 1) {
    const Json index = {{"schemaVersion", 2},
                        {"mediaType", kIndexType},
                        {"manifests", index_manifests}};
    index_blob.push_back(text_blob(index.dump()));
    top = {{"mediaType", kIndexType},
           {"digest", digest(index_blob[0].hex)},
           {"size", index_blob[0].size}};
  }
  built.index_digest = top["digest"].get<std::string>();
  if (!spec.ref_name.empty())
    top["annotations"] = {{kRefNameKey, spec.ref_name}};
  const std::string index_json = Json({{"schemaVersion", 2},
                                       {"mediaType", kIndexType},
                                       {"manifests", Json::array({top})}})
                                     .dump();

  // Blobs in archive order: layers, configs, manifests, nested index.
  std::vector<Blob*> order;
  for (auto* group : {&layers, &configs, &manifests, &index_blob}) {
    for (Blob& b : *group) {
      b.name = "blobs/sha256/" + b.hex;
      order.push_back(&b);
    }
  }
  if (damage == Damage::kCorruptLayer)
    layers[0].flip_at = flip_offset(sources[0]);
  if (damage == Damage::kTruncated) mark_cut(order);

  OutputSink out(path, compression);
  TarWriter tar(out);
  tar.file("oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  const bool write_index = damage != Damage::kMissingIndex;
  if (write_index && spec.index_first) tar.file("index.json", index_json);
  tar.dir("blobs/");
  tar.dir("blobs/sha256/");
  write_extras(tar, damage);
  for (const Blob* b : order) {
    if (damage == Damage::kMissingBlob && b == &layers[0]) continue;
    write_blob(tar, out, *b);
  }
  if (write_index && !spec.index_first) tar.file("index.json", index_json);
  tar.close();
  out.close();
  built.bytes = file_size(path);
  return built;
}

BuiltImage build_docker(const std::string& path, const ImageSpec& spec,
                        const Platform& p, Compression compression,
                        Damage damage) {
  if (damage == Damage::kSizeMismatch)
    throw std::invalid_argument(
        "oci_builder: docker archives declare no sizes (kSizeMismatch)");
  BuiltImage built;
  built.path = path;
  const LayerSource source{layer_seed(spec.seed, 0), spec.layer_bytes};
  Blob layer = layer_blob(source);
  layer.name = layer.hex + "/layer.tar";
  const std::string diff_id = damage == Damage::kManifestDigestMismatch
                                  ? wrong_hex(layer.hex)
                                  : layer.hex;
  Json config = p.json();
  config["config"] = Json::object();
  config["rootfs"] = {{"type", "layers"},
                      {"diff_ids", Json::array({digest(diff_id)})}};
  Blob cfg = text_blob(config.dump());
  cfg.name = cfg.hex + ".json";
  built.index_digest = digest(cfg.hex);
  built.layer_digests[p.text] = digest(layer.hex);

  Json tags = Json::array();
  if (!spec.ref_name.empty()) tags.push_back(spec.ref_name);
  const std::string manifest_json =
      Json::array({{{"Config", cfg.name},
                    {"RepoTags", tags},
                    {"Layers", Json::array({layer.name})}}})
          .dump();

  std::vector<Blob*> order{&layer, &cfg};
  if (damage == Damage::kCorruptLayer) layer.flip_at = flip_offset(source);
  if (damage == Damage::kTruncated) mark_cut(order);

  OutputSink out(path, compression);
  TarWriter tar(out);
  const bool write_index = damage != Damage::kMissingIndex;
  if (write_index && spec.index_first) tar.file("manifest.json", manifest_json);
  write_extras(tar, damage);
  tar.dir(layer.hex + "/");
  if (damage != Damage::kMissingBlob) write_blob(tar, out, layer);
  write_blob(tar, out, cfg);
  if (write_index && !spec.index_first)
    tar.file("manifest.json", manifest_json);
  tar.close();
  out.close();
  built.bytes = file_size(path);
  return built;
}

}  // namespace

BuiltImage build_image(const std::string& path, const ImageSpec& spec,
                       ArchiveFormat format, Compression compression,
                       Damage damage) {
  if (spec.platforms.empty())
    throw std::invalid_argument("oci_builder: no platforms");
  std::vector<Platform> platforms;
  for (const auto& text : spec.platforms)
    platforms.push_back(parse_platform(text));
  if (damage == Damage::kNotATar) {
    write_not_a_tar(path, spec);
    BuiltImage built;
    built.path = path;
    built.bytes = file_size(path);
    return built;
  }
  if (format == ArchiveFormat::kDockerArchive)
    return build_docker(path, spec, platforms[0], compression, damage);
  return build_oci(path, spec, platforms, compression, damage);
}

std::string tar_of(
    const std::vector<std::pair<std::string, std::string>>& files) {
  // Each entry: its data, padded, and at most a pax header and a ustar
  // header; then the end-of-archive blocks.
  std::size_t capacity = 10240;
  for (const auto& f : files) capacity += f.second.size() + 4 * kTarHeader;
  std::string buf(capacity, '\0');
  std::size_t used = 0;
  ArchiveWritePtr a(archive_write_new());
  archive_write_set_format_pax_restricted(a.get());
  if (archive_write_open_memory(a.get(), buf.data(), buf.size(), &used) !=
      ARCHIVE_OK)
    throw std::runtime_error("tar_of: cannot open the buffer");
  for (const auto& [name, data] : files) {
    ArchiveEntryPtr e(archive_entry_new());
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(data.size()));
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK ||
        archive_write_data(a.get(), data.data(), data.size()) !=
            static_cast<la_ssize_t>(data.size()))
      throw std::runtime_error("tar_of: cannot write " + name);
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK)
    throw std::runtime_error("tar_of: cannot close");
  buf.resize(used);
  return buf;
}

}  // namespace gpunode::test
