// Builds container image archives for tests: OCI image layouts and legacy
// `docker save` archives, optionally compressed and optionally damaged in one
// well-defined way. Everything is generated locally with libarchive; nothing
// is downloaded. Output is deterministic: the same arguments give the same
// bytes (and so the same digests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpunode::test {

struct ImageSpec {
  // Value of org.opencontainers.image.ref.name on the top-level index.json
  // descriptor (may be tag-only, e.g. "v0.19.3"); empty = no annotation.
  // Docker archives use it as the single RepoTags entry (empty = no tags).
  std::string ref_name = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";
  // "os/arch" or "os/arch/variant". One manifest each. More than one: the
  // top-level index.json points to an image index blob that lists the
  // manifests (nested, like `ctr export` and skopeo). Exactly one: index.json
  // points straight at the manifest. Docker archives use the first only.
  std::vector<std::string> platforms = {"linux/amd64", "linux/arm64"};
  // Size of the one regular file inside each platform's single layer. The
  // content is pseudo-random (seeded, deterministic), so it does not
  // compress. It is generated in chunks and streamed, never held whole.
  std::size_t layer_bytes = 4096;
  std::uint32_t seed = 1;  // changes the content, and so every digest
  // Write index.json (OCI) / manifest.json (docker) before the blobs instead
  // of after them. Real archives do both.
  bool index_first = false;
};

// kDockerArchive: legacy `docker save` layout: manifest.json
// [{Config, RepoTags, Layers}], config "<hex>.json", layers
// "<hex>/layer.tar"; single platform only (the first of platforms).
enum class ArchiveFormat { kOciLayout, kDockerArchive };

// Applies to the whole archive file (image.tar.gz / image.tar.zst); the
// blobs inside stay uncompressed. Note `ctr images import` reads only
// uncompressed tars.
enum class Compression { kNone, kGzip, kZstd };

// At most one defect per archive. Where a damage names "a layer", it is the
// layer of the first platform.
enum class Damage {
  kNone,
  // The tar stream ends in the middle of the largest blob's data (no end of
  // archive marker). Compressed: the compressed stream itself is complete
  // and holds the cut tar (like `head -c N image.tar | gzip`).
  kTruncated,
  kCorruptLayer,  // one byte of a layer blob flipped (same size, wrong hash)
  // OCI: a manifest references a layer by a digest that is not that blob's;
  // the blob is present under its true name (so the referenced one is not).
  // Docker: the config's rootfs.diff_ids names a wrong digest for the layer
  // (docker archives carry layer digests only there).
  kManifestDigestMismatch,
  // OCI: the manifest's layer descriptor says one byte more than the blob
  // holds. Docker archives declare no sizes: throws std::invalid_argument.
  kSizeMismatch,
  kMissingBlob,    // a layer blob referenced but absent
  kMissingIndex,   // no index.json (OCI) / no manifest.json (docker)
  kPathTraversal,  // an extra regular entry named "../evil"
  kAbsolutePath,   // an extra regular entry named "/etc/evil"
  kSymlinkEntry,   // an extra symlink entry "blobs/sha256/link" -> /etc/passwd
  kHardlinkEntry,  // an extra hardlink "blobs/sha256/hardlink" -> /etc/passwd
  kNotATar,        // the file is random bytes (compression ignored)
};

struct BuiltImage {
  std::string path;  // the archive written
  // Digest index.json points at for the ref (the nested index, or the
  // manifest when there is one platform), "sha256:<hex>". Docker archives:
  // the config digest. Filled for every damage but kNotATar.
  std::string index_digest;
  // platform -> manifest digest ("sha256:<hex>"). Empty for docker archives
  // (they hold no manifest; containerd makes one on import).
  std::map<std::string, std::string> manifest_digests;
  // platform -> layer digest ("sha256:<hex>"), the uncompressed layer tar
  // (= its diff_id). For docker archives, the first platform only.
  std::map<std::string, std::string> layer_digests;
  std::uint64_t bytes = 0;  // archive size on disk
};

// Writes the archive to `path` (replacing it) and says what is in it.
// Throws std::runtime_error when it cannot, std::invalid_argument for a
// spec it cannot honour (no platforms, bad platform, kSizeMismatch with
// kDockerArchive).
BuiltImage build_image(const std::string& path, const ImageSpec& spec,
                       ArchiveFormat format = ArchiveFormat::kOciLayout,
                       Compression compression = Compression::kNone,
                       Damage damage = Damage::kNone);

// A tar of the given (name, content) regular entries, in memory, for
// archives whose documents a test writes by hand. Throws
// std::runtime_error when libarchive fails.
std::string tar_of(
    const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace gpunode::test
