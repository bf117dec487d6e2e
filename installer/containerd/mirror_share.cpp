#include "containerd/mirror_share.hpp"

#include <set>

#include "containerd/registry_mirror.hpp"

namespace gpunode {
namespace {

constexpr const char* kSourceLabel = "containerd.io/distribution.source.";

constexpr const char* kGcRef = "containerd.io/gc.ref.content.";

// The image's blobs: `digest` and what it references for containerd's
// garbage collector (labels containerd.io/gc.ref.content.m.N, .config,
// .l.N, which import sets on an index and a manifest for the children it
// keeps), recursively. Exactly the content containerd keeps for the image:
// an index's manifests of other platforms, which import does not keep, are
// left out (reading them by their digests in the index would race the
// collector that removes them).
void walk(const std::string& digest,
          const std::map<std::string, std::vector<std::string>>& store,
          std::set<std::string>& seen, std::vector<std::string>& out) {
  auto it = store.find(digest);
  if (it == store.end() || !seen.insert(digest).second) return;
  out.push_back(digest);
  for (const auto& label : it->second) {
    const std::size_t eq = label.find('=');
    if (label.rfind(kGcRef, 0) == 0 && eq != std::string::npos)
      walk(label.substr(eq + 1), store, seen, out);
  }
}

bool has(const std::vector<std::string>& labels, const std::string& label) {
  for (const auto& l : labels)
    if (l == label) return true;
  return false;
}

}  // namespace

std::string ShareGaps::text() const {
  std::string out;
  if (digest_ref_missing) out = "no digest reference " + digest_ref;
  if (!digest_ref_missing && digest_ref_unpinned)
    out = "digest reference " + digest_ref + " not pinned";
  if (!unlabelled.empty()) {
    out += (out.empty() ? "" : ", ") + std::to_string(unlabelled.size()) +
           " of " + std::to_string(blobs) +
           " blob(s) without the distribution-source label";
  }
  return out;
}

std::size_t ShareGaps::writes() const {
  return (digest_ref_missing    ? 2
          : digest_ref_unpinned ? 1
                                : 0) +
         unlabelled.size();
}

std::string digest_reference(const std::string& ref,
                             const std::string& digest) {
  const ImageName name = split_image_name(ref);
  return name.registry + "/" + name.repository + "@" + digest;
}

Result<ShareGaps> find_share_gaps(CtrClient& ctr, const std::string& ref,
                                  const std::string& digest) {
  const ImageName name = split_image_name(ref);
  ShareGaps gaps;
  gaps.digest_ref = digest_reference(ref, digest);
  gaps.label = kSourceLabel + name.registry + "=" + name.repository;
  auto found = ctr.find(gaps.digest_ref);
  if (!found) return found.error();
  gaps.digest_ref_missing = !*found;
  gaps.digest_ref_unpinned =
      *found && !(*found)->has_label(kPinnedLabel, "pinned");
  auto store = ctr.content_labels();
  if (!store) return store.error();
  std::set<std::string> seen;
  std::vector<std::string> blobs;
  walk(digest, *store, seen, blobs);
  gaps.blobs = blobs.size();
  for (const auto& b : blobs) {
    if (!has(store->at(b), gaps.label)) gaps.unlabelled.push_back(b);
  }
  return gaps;
}

Result<void> close_share_gaps(CtrClient& ctr, const std::string& ref,
                              const ShareGaps& gaps) {
  // Labels first: Spegel walks the content when the digest reference
  // appears (its ImageCreate event), and filters by the label then.
  for (const auto& b : gaps.unlabelled) {
    if (auto r = ctr.label_content(b, gaps.label); !r) return r;
  }
  if (gaps.digest_ref_missing) {
    if (auto r = ctr.tag(ref, gaps.digest_ref); !r) return r;
  }
  if (gaps.digest_ref_missing || gaps.digest_ref_unpinned)
    return ctr.pin(gaps.digest_ref);
  return {};
}

}  // namespace gpunode
