// The shape k3s's embedded registry mirror (Spegel) can serve an imported
// image in. Since spegel-org/spegel#888 Spegel advertises only content that
// a digest reference reaches (name@sha256:...), filtered by the
// containerd.io/distribution.source.<registry>=<repository> label on each
// blob. The CRI adds both when it pulls; `ctr images import` adds neither
// (k3s-io/k3s#13222). k3s's fix (k3s-io/k3s#13221, "Fix spegel sharing of
// imported images": "Add digests and content labels to images imported from
// disk ... manifests, config, and layers") does it for its images folder;
// gpunode does the same for the image it imports, and pins the digest
// reference too, so that kubelet's image GC keeps that name as well.
#pragma once

#include <string>
#include <vector>

#include "containerd/ctr_client.hpp"

namespace gpunode {

struct ShareGaps {
  std::string digest_ref;  // e.g. nvcr.io/nvidia/k8s-device-plugin@sha256:...
  std::string label;       // containerd.io/distribution.source.nvcr.io=...
  bool digest_ref_missing = false;
  bool digest_ref_unpinned = false;
  std::vector<std::string> unlabelled;  // blobs of the image without it
  std::size_t blobs = 0;                // blobs of the image in the store

  bool none() const {
    return !digest_ref_missing && !digest_ref_unpinned && unlabelled.empty();
  }
  // "no digest reference nvcr.io/...@sha256:..., 4 of 4 blob(s) without
  // the distribution-source label", for summaries.
  std::string text() const;
  // The number of writes close_share_gaps() makes.
  std::size_t writes() const;
};

// "nvcr.io/nvidia/k8s-device-plugin@sha256:...": the name Spegel serves.
std::string digest_reference(const std::string& ref, const std::string& digest);

// What the image `ref`, whose record points at `digest`, lacks.
Result<ShareGaps> find_share_gaps(CtrClient& ctr, const std::string& ref,
                                  const std::string& digest);

// Tags, pins and labels what find_share_gaps() found missing.
Result<void> close_share_gaps(CtrClient& ctr, const std::string& ref,
                              const ShareGaps& gaps);

}  // namespace gpunode
