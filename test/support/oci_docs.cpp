#include "oci_docs.hpp"

#include <nlohmann/json.hpp>

#include "gpunode/digest.hpp"
#include "oci_builder.hpp"

namespace gpunode::test {

using Json = nlohmann::json;

std::string OciDocs::blob(const std::string& media, const std::string& content,
                          const std::string& platform) {
  const std::string hex = sha256_hex(content);
  bool have = false;
  for (const auto& f : files) have |= f.first == "blobs/sha256/" + hex;
  if (!have) files.emplace_back("blobs/sha256/" + hex, content);
  Json d = {{"mediaType", media},
            {"digest", "sha256:" + hex},
            {"size", content.size()}};
  if (!platform.empty()) {
    const auto slash = platform.find('/');
    d["platform"] = {{"os", platform.substr(0, slash)},
                     {"architecture", platform.substr(slash + 1)}};
  }
  return d.dump();
}

std::string OciDocs::config(const std::vector<std::string>& diff_ids,
                            const std::string& media) {
  Json c = {{"architecture", "amd64"},
            {"os", "linux"},
            {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
  return blob(media, c.dump());
}

std::string OciDocs::manifest(const std::string& config_desc,
                              const std::vector<std::string>& layer_descs,
                              const std::string& platform) {
  Json layers = Json::array();
  for (const auto& l : layer_descs) layers.push_back(Json::parse(l));
  Json m = {{"schemaVersion", 2},
            {"mediaType", kOciManifestType},
            {"config", Json::parse(config_desc)},
            {"layers", layers}};
  return blob(kOciManifestType, m.dump(), platform);
}

std::string OciDocs::index(const std::string& child, std::size_t copies) {
  Json list = Json::array();
  const Json c = Json::parse(child);
  for (std::size_t i = 0; i < copies; ++i) list.push_back(c);
  Json idx = {
      {"schemaVersion", 2}, {"mediaType", kOciIndexType}, {"manifests", list}};
  return blob(kOciIndexType, idx.dump());
}

std::string OciDocs::tar(const std::string& top, const std::string& ref) const {
  Json desc = Json::parse(top);
  desc["annotations"] = {{"org.opencontainers.image.ref.name", ref}};
  Json idx = {{"schemaVersion", 2},
              {"mediaType", kOciIndexType},
              {"manifests", Json::array({desc})}};
  std::vector<std::pair<std::string, std::string>> all = {
      {"oci-layout", R"({"imageLayoutVersion":"1.0.0"})"},
      {"index.json", idx.dump()}};
  all.insert(all.end(), files.begin(), files.end());
  return tar_of(all);
}

std::string digest_of_desc(const std::string& desc) {
  return Json::parse(desc).value("digest", "");
}

}  // namespace gpunode::test
