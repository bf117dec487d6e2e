// `gpunode bundle create --pull`: fetches an image from an OCI registry
// (distribution API v2, over libcurl) into an uncompressed OCI-layout tar
// that verify_image_archive and `ctr images import` accept.
//
// The served index (or manifest) is kept byte for byte, so the archive's top
// digest is the registry's; blobs of platforms not asked for are left out
// (the image stage only needs the host's platform, and ctr imports the
// platforms it finds).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "gpunode/result.hpp"

namespace gpunode::bundle {

struct PullOptions {
  // "host[:port]/repo[:tag|@sha256:...]", e.g. nvcr.io/nvidia/k8s-device-
  // plugin:v0.19.3 or 127.0.0.1:5000/nvidia/k8s-device-plugin:v0.19.3.
  std::string ref;
  std::string out_path;  // the tar to write (replaced atomically)
  std::vector<std::string> platforms = {"linux/amd64", "linux/arm64"};
  std::string ca_file;         // PEM CA bundle instead of the system CAs
  bool insecure_http = false;  // plain HTTP; only when explicitly asked
  std::chrono::seconds timeout{1800};  // the whole pull
  // org.opencontainers.image.ref.name written into index.json; empty = ref.
  // The archive names the image, not the registry it came through.
  std::string name_as;
};

struct ParsedRef {
  std::string registry;    // host[:port]
  std::string repository;  // e.g. nvidia/k8s-device-plugin
  std::string reference;   // tag or sha256:<hex>
};

// Errors: ExitCode::kUsage for a malformed reference.
Result<ParsedRef> parse_image_ref(const std::string& ref);

// The locked ref (images.lock) whose repository path and tag equal `ref`'s,
// whatever registry `ref` names (a mirror); else `ref` itself.
std::string archive_name_for(const std::string& ref);

// Pulls `options.ref` and writes options.out_path. Returns the digest of the
// top descriptor ("sha256:<hex>": the served index or manifest). Errors:
// kUsage (malformed ref, none of the platforms in the image), kBlocked
// (registry unreachable, unknown repository/tag, HTTP errors, local I/O),
// kIntegrity (a blob or manifest whose SHA-256 or size is not what its
// descriptor says; the message names it), kTimeout (options.timeout passed).
// Nothing is left at out_path on failure.
//
// Docker schema 2 manifest lists / manifests are kept as served (OCI layout
// descriptors may carry those media types; ctr imports them). Anonymous
// pulls only: a registry that wants credentials is refused (kBlocked).
Result<std::string> pull_to_oci_archive(const PullOptions& options);

}  // namespace gpunode::bundle
