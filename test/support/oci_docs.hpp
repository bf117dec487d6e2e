// OCI image archives written document by document, in memory, for tests
// that need a shape the builder (oci_builder.hpp) does not make: a chosen
// media type, no layers, an index that lists one child many times.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace gpunode::test {

inline constexpr const char* kOciIndexType =
    "application/vnd.oci.image.index.v1+json";
inline constexpr const char* kOciManifestType =
    "application/vnd.oci.image.manifest.v1+json";
inline constexpr const char* kOciConfigType =
    "application/vnd.oci.image.config.v1+json";
inline constexpr const char* kOciLayerType =
    "application/vnd.oci.image.layer.v1.tar";

// The blobs of an OCI layout, added one by one; tar() adds index.json
// naming `top` as `ref`.
struct OciDocs {
  std::vector<std::pair<std::string, std::string>> files;

  // Adds `content` as a blob; returns its descriptor's JSON text.
  std::string blob(const std::string& media, const std::string& content,
                   const std::string& platform = "");
  // A config for linux/amd64 with one diff_id per layer digest given.
  std::string config(const std::vector<std::string>& diff_ids,
                     const std::string& media = kOciConfigType);
  // A manifest of `config` and `layers` (descriptor texts).
  std::string manifest(const std::string& config_desc,
                       const std::vector<std::string>& layer_descs,
                       const std::string& platform = "linux/amd64");
  // An index listing `child` (a descriptor text) `copies` times.
  std::string index(const std::string& child, std::size_t copies);
  // The archive: index.json (naming `top` as `ref`), then the blobs.
  std::string tar(const std::string& top, const std::string& ref) const;
};

// The digest ("sha256:<hex>") a descriptor text names.
std::string digest_of_desc(const std::string& desc);

}  // namespace gpunode::test
