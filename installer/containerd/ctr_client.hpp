// k3s's containerd, through `k3s ctr -n k8s.io ...` (argv, never a shell).
// k3s ctr talks to /run/k3s/containerd/containerd.sock by default; tests put
// a `k3s` on PATH that forwards `k3s ctr` to a private containerd.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/host.hpp"
#include "gpunode/progress.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

inline constexpr const char* kPinnedLabel = "io.cri-containerd.pinned";
// k3s sets this beside the CRI pin on images it imports from its images
// directory, and strips both from every image carrying it at each start.
inline constexpr const char* kK3sPinnedLabel = "io.cattle.k3s.pinned";

struct ImageRecord {
  std::string ref;
  std::string media_type;
  std::string digest;
  std::vector<std::string> labels;  // "key=value"
  bool has_label(const std::string& key, const std::string& value) const;
};

struct ImageCompleteness {
  bool complete = false;  // every blob the image needs is in the content store
  bool unpacked = false;  // unpacked into the snapshotter
  std::string status;     // as ctr says it, e.g. "complete (2/2)"
};

class CtrClient {
 public:
  CtrClient(ProcessRunner& proc, std::chrono::milliseconds timeout)
      : proc_(proc), timeout_(timeout) {}
  // Where the imports show how much of the archive ctr has read ("import",
  // the image's base name). Unset: nothing is shown, and import_file lets
  // ctr open the file itself.
  void set_progress(Progress& progress) { progress_ = &progress; }

  Result<std::optional<ImageRecord>> find(const std::string& ref);
  Result<ImageCompleteness> completeness(const std::string& ref);
  // The blob's bytes (manifests and configs; small).
  Result<std::string> content(const std::string& digest);
  Result<void> import_file(const std::string& path,
                           const std::string& base_name);
  // `total_bytes`: what the source will give, for the progress (0: not
  // known, e.g. an archive decompressed on the fly).
  Result<void> import_stream(const ProcessRunner::InputSource& source,
                             const std::string& base_name,
                             std::uint64_t total_bytes = 0);
  Result<void> pin(const std::string& ref);
  Result<void> remove(const std::string& ref);
  // `ctr images tag SOURCE TARGET`: a second name for the same target.
  Result<void> tag(const std::string& source, const std::string& target);
  // The content store's blobs and their labels ("key=value"), by digest.
  Result<std::map<std::string, std::vector<std::string>>> content_labels();
  // `ctr content label DIGEST key=value`: sets that one label, keeping the
  // others (the garbage collector's references among them).
  Result<void> label_content(const std::string& digest,
                             const std::string& label);

  // Parsers, exposed for tests.
  static std::vector<ImageRecord> parse_images_ls(const std::string& out);
  static std::optional<ImageCompleteness> parse_images_check(
      const std::string& out, const std::string& ref);
  static std::map<std::string, std::vector<std::string>> parse_content_ls(
      const std::string& out);

 private:
  Result<ProcessResult> ctr(std::vector<std::string> args,
                            const std::string& what);
  std::vector<std::string> import_args(const std::string& base_name);
  Result<void> import_input(const ProcessRunner::InputSource& source,
                            const std::string& base_name,
                            std::uint64_t total_bytes, const std::string& what);

  ProcessRunner& proc_;
  std::chrono::milliseconds timeout_;
  Progress* progress_ = &no_progress();
};

}  // namespace gpunode
