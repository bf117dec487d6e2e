// One image the image stage keeps in k3s's containerd: imported from a
// verified archive, complete, unpacked for this node, pinned, and shaped for
// the embedded registry mirror when that is on. The device plugin image is
// one; the CUDA sample that `--smoke` runs is the other (issue 16): an
// air-gapped node can pull neither.
#pragma once

#include <optional>
#include <string>

#include "gpunode/context.hpp"
#include "gpunode/result.hpp"
#include "gpunode/stage.hpp"

namespace gpunode {

struct KeptImage {
  std::string name;  // "device-plugin", "cuda-sample": bundle.toml's names
  std::string ref;
  // What it is for, in messages: "the device plugin image".
  std::string role;
  // A missing image with nothing to import it from blocks the stage; for
  // an image that is not required it is a warning (the CUDA sample: the
  // smoke stage names that failure itself, the device plugin must not wait
  // for it).
  bool required = true;
};

// The archive an import of `image` would read: --image-archive (the device
// plugin only) or the verified bundle's, a real path; nullopt when there is
// none. An error when the bundle cannot be used or lacks the device plugin.
Result<std::optional<std::string>> archive_source(Context& ctx,
                                                  const KeptImage& image);

// What containerd holds of `image` against what is wanted. Its facts:
// "image" (ref, digest, pinned, complete, unpacked, archive), "mirror",
// and "import_bytes"/"unpacked_bytes" when an import is needed.
Check check_kept_image(Context& ctx, const KeptImage& image);

// Brings `image` to what check_kept_image wants, given the code it found
// (image.missing, image.stale, image.unpinned, image.unshared).
Result<void> apply_kept_image(Context& ctx, const KeptImage& image,
                              const std::string& code);

}  // namespace gpunode
