#include "containerd/mirror_share.hpp"

#include <nlohmann/json.hpp>
#include <set>

#include "containerd/registry_mirror.hpp"

namespace gpunode {
namespace {

constexpr const char* kSourceLabel = "containerd.io/distribution.source.";

// The blobs reachable from `digest` that are in the store: an index's
// manifests (those of other platforms may not have been imported), a
// manifest's config and layers. Manifests and indexes are read; layers not.
Result<void> walk(CtrClient& ctr, const std::string& digest,
                  const std::map<std::string, std::vector<std::string>>& store,
                  std::set<std::string>& seen, std::vector<std::string>& out) {
  if (!store.count(digest) || !seen.insert(digest).second) return {};
  out.push_back(digest);
  auto text = ctr.content(digest);
  if (!text) return text.error();
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return {};  // a config or layer read as such: a leaf
  for (const char* key : {"manifests", "layers"}) {
    if (!j.contains(key) || !j[key].is_array()) continue;
    for (const auto& d : j[key]) {
      if (!d.is_object() || !d.contains("digest") || !d["digest"].is_string())
        continue;
      const std::string child = d["digest"];
      if (std::string(key) == "layers") {
        if (store.count(child) && seen.insert(child).second)
          out.push_back(child);
      } else if (auto r = walk(ctr, child, store, seen, out); !r) {
        return r;
      }
    }
  }
  if (j.contains("config") && j["config"].is_object() &&
      j["config"].contains("digest") && j["config"]["digest"].is_string()) {
    const std::string config = j["config"]["digest"];
    if (store.count(config) && seen.insert(config).second)
      out.push_back(config);
  }
  return {};
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
  if (auto r = walk(ctr, digest, *store, seen, blobs); !r) return r.error();
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
