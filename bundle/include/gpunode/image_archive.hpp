// Container image archives as ctr imports them: OCI image layouts and docker
// archives in a tar, optionally compressed. Verified before anything touches
// containerd, because `ctr images import` of a corrupt archive still creates
// the image record, and blobs from earlier imports can hide a bad layer.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpunode/result.hpp"

namespace gpunode {

struct ImageArchiveInfo {
  enum class Format { kOciLayout, kDockerArchive } format = Format::kOciLayout;
  std::string
      ref;  // full reference, e.g. nvcr.io/nvidia/k8s-device-plugin:v0.19.3
  std::string name_in_archive;  // as the archive spells it (may be a bare tag)
  // What containerd will hold as the image's identity: for OCI the digest of
  // the descriptor index.json gives for the ref (index or manifest); for a
  // docker archive the config digest (ctr writes a new manifest for it).
  std::string target_digest;
  std::vector<std::string> platforms;  // those the archive has a manifest for
  bool compressed = false;             // gzip/zstd/...: must be piped to ctr
  std::uint64_t bytes_verified = 0;    // blob bytes hashed
  std::uint64_t entries = 0;
  // What the import takes on disk, from the sizes the archive declares, not
  // the (possibly compressed) file's: the tar members' sizes, which ctr
  // stores as they are in its content store, and (verification only) an
  // estimate of this platform's layers unpacked into a snapshot
  // (image_archive.cpp, unpacked_size, says how it is bounded).
  std::uint64_t stored_bytes = 0;
  std::uint64_t unpacked_bytes = 0;
  // Indexes and manifests the verification walked: at most three times the
  // documents in the archive, however often an index repeats a child.
  std::uint64_t documents_walked = 0;
};

// "linux/amd64" or "linux/arm64": what this machine runs.
std::string host_platform();

// Reads only what names the image (index.json / manifest.json and small
// configs); fast on an uncompressed tar, whose data is skipped by seeking.
// Nothing is verified: use it to decide whether an import is needed at all.
Result<ImageArchiveInfo> peek_image_archive(const std::string& path,
                                            const std::string& expected_ref);
// The same over a file already open (read from where it stands, which must
// be its start); `name` stands for it in messages. bundle verify reads the
// archive it has just hashed through the descriptor it checked.
Result<ImageArchiveInfo> peek_image_archive_fd(int fd, const std::string& name,
                                               const std::string& expected_ref);

// Streams every entry once, hashing every blob (SHA-256) against its name
// and every descriptor's size, and checks that the archive holds a complete
// image named `expected_ref` for `platform` that containerd can unpack (at
// least one layer, known layer and config media types, one diff_id per
// layer). Errors: ExitCode::kUsage for a malformed archive (not a tar, no
// index, unsafe entry names or links, wrong image, wrong platform, an image
// containerd cannot unpack), ExitCode::kIntegrity for damaged content
// (truncated, hash or size mismatch, missing blob). Each names the entry.
// The work is linear in the archive's size (each document is walked a
// bounded number of times); past `deadline` it stops with
// ExitCode::kTimeout, on a Ctrl-C with ExitCode::kInterrupted.
Result<ImageArchiveInfo> verify_image_archive(
    const std::string& path, const std::string& expected_ref,
    const std::string& platform,
    std::chrono::steady_clock::time_point deadline =
        std::chrono::steady_clock::time_point::max());

// The same two over an archive already in memory (tests and fuzzing: nothing
// touches the disk); `name` stands for the path in messages.
Result<ImageArchiveInfo> peek_image_archive_bytes(
    std::string_view bytes, const std::string& name,
    const std::string& expected_ref);
Result<ImageArchiveInfo> verify_image_archive_bytes(
    std::string_view bytes, const std::string& name,
    const std::string& expected_ref, const std::string& platform,
    std::chrono::steady_clock::time_point deadline =
        std::chrono::steady_clock::time_point::max());

// The decompressed tar stream of a (possibly compressed) archive, a chunk
// at a time, for `ctr images import -`. An empty chunk is the end.
class DecompressedStream {
 public:
  explicit DecompressedStream(const std::string& path);
  ~DecompressedStream();
  DecompressedStream(const DecompressedStream&) = delete;
  DecompressedStream& operator=(const DecompressedStream&) = delete;
  Result<std::string_view> next();

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace gpunode
