#include "plugin/gpu_labels.hpp"

#include <cctype>

namespace gpunode {

using kube::json;

std::string label_value(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                    c == '_' || c == '.';
    out += ok ? c : '-';
    if (out.size() == 63) break;
  }
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out.back())))
    out.pop_back();
  std::size_t first = 0;
  while (first < out.size() &&
         !std::isalnum(static_cast<unsigned char>(out[first])))
    ++first;
  return out.substr(first);
}

std::map<std::string, std::string> gpu_labels_for(const GpuInventory& inv) {
  std::map<std::string, std::string> labels;
  labels[kGpuPresentLabel] = inv.gpus.empty() ? "false" : "true";
  labels[kGpuCountLabel] = std::to_string(inv.gpus.size());
  if (!inv.gpus.empty()) {
    const GpuInfo& first = inv.gpus.front();
    const std::string product = label_value(first.name);
    if (!product.empty()) labels[kGpuProductLabel] = product;
    if (first.memory_mib)
      labels[kGpuMemoryLabel] = std::to_string(*first.memory_mib);
  }
  return labels;
}

std::map<std::string, std::string> gpu_annotations_for(
    const GpuInventory& inv) {
  std::string uuids;
  for (const GpuInfo& g : inv.gpus)
    uuids += (uuids.empty() ? "" : ",") + g.uuid;
  return {{kGpuUuidsAnnotation, uuids}};
}

std::vector<std::string> published_gpu_uuids(const json& node) {
  const json notes = node.value("metadata", json::object())
                         .value("annotations", json::object());
  const std::string text = notes.value(kGpuUuidsAnnotation, "");
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::optional<int> labelled_gpu_count(const json& node) {
  const json labels = node["metadata"].value("labels", json::object());
  const std::string count = labels.value(kGpuCountLabel, "");
  if (count.empty() || count.size() > 4 ||
      count.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoi(count);
}

bool labelled_gpu_present(const json& node) {
  const json labels = node["metadata"].value("labels", json::object());
  return labels.value(kGpuPresentLabel, "") == "true";
}

void require_gpu_nodes(json& pod_spec) {
  if (selects_gpu_nodes(pod_spec)) return;
  const json expression = {{"key", kGpuPresentLabel},
                           {"operator", "In"},
                           {"values", json::array({"true"})}};
  json& terms = pod_spec["affinity"]["nodeAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"]
                        ["nodeSelectorTerms"];
  if (!terms.is_array() || terms.empty()) {
    terms = json::array({{{"matchExpressions", json::array({expression})}}});
    return;
  }
  for (auto& term : terms) term["matchExpressions"].push_back(expression);
}

bool selects_gpu_nodes(const json& pod_spec) {
  if (!pod_spec.is_object()) return false;
  const json selector = pod_spec.value("nodeSelector", json::object());
  if (selector.value(kGpuPresentLabel, "") == "true") return true;
  const json terms =
      pod_spec.value("affinity", json::object())
          .value("nodeAffinity", json::object())
          .value("requiredDuringSchedulingIgnoredDuringExecution",
                 json::object())
          .value("nodeSelectorTerms", json::array());
  // Terms are ORed: every term must require the label.
  if (terms.empty()) return false;
  for (const auto& term : terms) {
    bool requires_it = false;
    for (const auto& e : term.value("matchExpressions", json::array())) {
      const json values = e.value("values", json::array());
      if (e.value("key", "") == kGpuPresentLabel &&
          e.value("operator", "") == "In" && values.size() == 1 &&
          values[0] == "true")
        requires_it = true;
    }
    if (!requires_it) return false;
  }
  return true;
}

}  // namespace gpunode
