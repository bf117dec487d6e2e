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
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/progress.hpp"
#include "gpunode/result.hpp"

namespace gpunode::bundle {

// A user name and password (or API key, or access token) for one registry,
// from an auth file (registry_auth.hpp). Sent as HTTP Basic to the registry
// or to its token service when they ask (a 401 challenge), and only over
// HTTPS unless --insecure-registry. The password is wiped when it goes.
struct RegistryCredentials {
  RegistryCredentials() = default;
  RegistryCredentials(const RegistryCredentials&) = default;
  RegistryCredentials& operator=(const RegistryCredentials&) = default;
  ~RegistryCredentials();
  std::string username;
  std::string password;
  std::string source;  // "FILE (key KEY)": where they came from, no secret
};

struct PullOptions {
  // "host[:port]/repo[:tag|@sha256:...]", e.g. nvcr.io/nvidia/k8s-device-
  // plugin:v0.19.3 or 127.0.0.1:5000/nvidia/k8s-device-plugin:v0.19.3.
  std::string ref;
  std::string out_path;  // the tar to write (replaced atomically)
  std::vector<std::string> platforms = {"linux/amd64", "linux/arm64"};
  std::string ca_file;         // PEM CA bundle instead of the system CAs
  bool insecure_http = false;  // plain HTTP; only when explicitly asked
  std::chrono::seconds timeout{1800};  // the whole pull
  // Sent only when the registry asks for credentials; none: anonymous.
  std::optional<RegistryCredentials> credentials;
  // Without credentials: why there are none, when an auth file says where
  // they would be (a credsStore helper; helper_note), for the message a
  // registry that wants some gets.
  std::string no_credentials_note;
  // org.opencontainers.image.ref.name written into index.json; empty = ref.
  // The archive names the image, not the registry it came through.
  std::string name_as;
  // Sees every byte written to the tar, in order (e.g. to hash it for
  // bundle.toml without reading the file back). May be empty.
  std::function<void(const char*, std::size_t)> on_output;
  // Sees the blobs' bytes as they stream ("pull", the ref, the sum of the
  // blob sizes of the platforms pulled).
  Progress* progress = &no_progress();
};

struct PulledImage {
  std::string digest;  // the top descriptor's: the served index or manifest
  std::vector<std::string> platforms;  // of options.platforms, those pulled
  std::uint64_t blob_bytes = 0;        // fetched from the registry
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

// Pulls `options.ref` and writes options.out_path in one pass: manifests
// first, into memory, then each blob streamed from the registry into its tar
// entry while its SHA-256 and size are checked. Errors:
// kUsage (malformed ref, none of the platforms in the image), kBlocked
// (registry unreachable, unknown repository/tag, HTTP errors, local I/O),
// kIntegrity (a blob or manifest whose SHA-256 or size is not what its
// descriptor says; the message names it), kTimeout (options.timeout passed).
// Nothing is left at out_path on failure.
//
// Docker schema 2 manifest lists / manifests are kept as served (OCI layout
// descriptors may carry those media types; ctr imports them). A registry
// that wants credentials when none were given, or refuses the given ones,
// is kBlocked (the message names the user and host, never the password).
Result<PulledImage> pull_to_oci_archive(const PullOptions& options);

}  // namespace gpunode::bundle
