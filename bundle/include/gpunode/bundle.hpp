// The offline bundle on the USB stick (DESIGN.md, "Bundle"):
//   gpunode-bundle/
//     bundle.toml        format version, creation time, gpunode version, images
//                        (ref, digest, platforms, file), minimum driver, and
//                        every other file with its size, SHA-256 and the
//                        SHA-256 of each fixed-size chunk (parallel
//                        verification; names the bad region)
//     bundle.toml.sig    Ed25519 signature over bundle.toml's exact bytes
//     (optional;
//                        required when a trust key is configured)
//     bin/gpunode        the installer itself
//     images/*.tar       OCI-layout or docker-archive tars, uncompressed
//     packages/deb/*.deb, packages/rpm/*.rpm
//                        the NVIDIA container toolkit set per distribution
//                        family (optional; gpunode/toolkit_packages.hpp)
//     manifests/*.yml    the RuntimeClass and the two device plugin manifests
//     install.sh         exec "$(dirname "$0")/bin/gpunode" install --bundle
//     "$(dirname "$0")" "$@"
// One chain of trust: the signature covers bundle.toml, which holds every
// file's hash. A bundle is never written to, extracted or copied to /tmp.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/progress.hpp"
#include "gpunode/result.hpp"

namespace gpunode::bundle {

inline constexpr int kFormatVersion = 1;
inline constexpr std::uint64_t kChunkBytes = 64ull * 1024 * 1024;
// bundle.toml larger than this is refused before parsing (a real one for a
// few images is tens of KiB; this bounds memory on hostile media).
inline constexpr std::size_t kMaxManifestBytes = 16u * 1024 * 1024;

struct FileEntry {
  std::string path;  // relative to the bundle root, '/'-separated, no "..", no
                     // leading '/'
  std::uint64_t size = 0;
  // Plain SHA-256 of the whole file (what `sha256sum` prints). verify_bundle
  // checks it for every file as well as the chunk digests: for a file of at
  // most one chunk it is the chunk's digest (an empty file: sha256 of
  // nothing); for a longer one a sequential pass runs beside the chunks'.
  std::string sha256;
  // hex sha256 of each chunk_bytes chunk (last may be short); ceil(size /
  // chunk_bytes) of them, so none for an empty file.
  std::vector<std::string> chunks;
};

struct ImageEntry {
  std::string name;    // "device-plugin", "cuda-sample"
  std::string ref;     // nvcr.io/nvidia/k8s-device-plugin:v0.19.3
  std::string digest;  // target digest as the image stage computes it
  std::vector<std::string> platforms;
  std::string
      file;  // e.g. images/k8s-device-plugin-v0.19.3.tar (also in files)
};

// One package of the NVIDIA container toolkit set the bundle carries
// (`bundle create --toolkit-packages DIR`), as read from its own control or
// header data at create time; the toolkit stage installs the set that matches
// the host's family and architecture.
struct PackageEntry {
  std::string family;   // "deb" or "rpm"
  std::string name;     // one of kToolkitPackageNames (toolkit_packages.hpp)
  std::string version;  // deb: the Version field ("1.17.8-1"); rpm:
                        // VERSION-RELEASE ("1.17.8-1")
  std::string arch;     // as the package says: deb amd64/arm64, rpm
                        // x86_64/aarch64
  std::string file;     // e.g. packages/deb/nvidia-container-toolkit_1.17.8-1_
                        // amd64.deb (also in files)
  std::string sha256;   // of the whole file, the same as its [[files]] entry's
};

struct Manifest {
  int format_version = kFormatVersion;
  std::string created;  // ISO 8601 UTC (fixed by --created / SOURCE_DATE_EPOCH
                        // for reproducibility)
  std::string gpunode_version;
  std::string min_driver;  // may be empty
  std::uint64_t chunk_bytes = kChunkBytes;
  std::vector<ImageEntry> images;
  // Sorted by family, arch, name ([[packages]]; none in an older bundle).
  std::vector<PackageEntry> packages;
  std::vector<FileEntry> files;  // sorted by path; every file except
                                 // bundle.toml and bundle.toml.sig
};

// bundle.toml text <-> Manifest (toml++). Deterministic output (sorted, fixed
// formatting). Parse errors: ExitCode::kUsage naming line; an unknown
// format_version: kUsage listing the supported versions.
std::string write_manifest(const Manifest& m);
Result<Manifest> parse_manifest(const std::string& text,
                                const std::string& source);

struct VerifyOptions {
  std::vector<std::string> trust_keys;  // PEM public keys (Ed25519)
  // With no trust keys the signature is not checked either way (the report
  // says signed_by_trusted_key = false; the CLI insists on this flag then).
  // With trust keys, this flag skips the check explicitly.
  bool insecure_skip_signature = false;
  unsigned threads = 0;  // 0: one per core
  // The run's deadline (--timeout): past it, verification stops with
  // ExitCode::kTimeout; a Ctrl-C stops it with kInterrupted.
  std::chrono::steady_clock::time_point deadline =
      std::chrono::steady_clock::time_point::max();
  // Sees the bytes hashed ("verify", the bundle directory, the listed
  // files' bytes), from every hashing thread.
  Progress* progress = &no_progress();
};

struct VerifyReport {
  Manifest manifest;
  bool signed_by_trusted_key = false;
  std::string
      key_fingerprint;  // sha256 of the DER public key, hex, when signed
  std::uint64_t bytes_hashed = 0;
};

// Verifies a bundle directory in place, read-only: signature first (when a
// trust key is given an unsigned or wrongly signed bundle is refused), then
// every file hashed once, streaming, its chunks spread over `threads`.
// Every problem is named (missing, extra, size changed, hash mismatch with the
// bad chunk's byte range, symlink, path escaping the bundle):
// ExitCode::kIntegrity. Open files and memory are bounded whatever the
// number of files (one open file and one read buffer per thread, plus
// bundle.toml's own size); running out of descriptors or memory is
// ExitCode::kCannotRun, never an integrity failure.
Result<VerifyReport> verify_bundle(const std::string& dir,
                                   const VerifyOptions& options);

// Ed25519 keys and signatures (OpenSSL EVP).
struct KeyPair {
  std::string private_pem;  // PKCS#8
  std::string public_pem;   // SubjectPublicKeyInfo
};
Result<KeyPair> generate_keypair();
Result<std::string> sign(const std::string& private_pem,
                         const std::string& data);  // raw 64-byte signature
Result<bool> signature_valid(const std::string& public_pem,
                             const std::string& data,
                             const std::string& signature);
std::string key_fingerprint(const std::string& public_pem);

}  // namespace gpunode::bundle
