#include "plugin/gpu_nodes.hpp"

#include <map>

#include "gpunode/sharing.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "plugin/gpu_labels.hpp"

namespace gpunode {

using kube::json;

std::optional<long long> advertised(const json& node,
                                    const std::string& resource) {
  const auto alloc =
      node.value("status", json::object()).value("allocatable", json::object());
  auto it = alloc.find(resource);
  if (it == alloc.end() || !it->is_string()) return std::nullopt;
  try {
    return std::stoll(it->get<std::string>());
  } catch (...) {
    return std::nullopt;
  }
}

Result<std::vector<GpuNode>> list_gpu_nodes(
    kube::Client& kube, std::chrono::steady_clock::time_point deadline) {
  auto nodes = kube.list("/api/v1/nodes", deadline);
  if (!nodes) return nodes.error();
  auto pods =
      kube.list(std::string("/api/v1/namespaces/") + kPluginNamespace +
                    "/pods?labelSelector=name%3Dnvidia-device-plugin-ds",
                deadline);
  if (!pods) return pods.error();
  std::map<std::string, std::vector<std::string>> pods_on;
  for (const auto& pod : pods->value("items", json::array())) {
    if (pod["metadata"].contains("deletionTimestamp")) continue;
    const std::string on =
        pod.value("spec", json::object()).value("nodeName", "");
    if (!on.empty()) pods_on[on].push_back(pod["metadata"].value("name", ""));
  }
  std::vector<GpuNode> out;
  for (const auto& node : nodes->value("items", json::array())) {
    GpuNode g;
    g.name = node["metadata"].value("name", "");
    g.node = node;
    g.labelled = labelled_gpu_present(node);
    g.gpus = labelled_gpu_count(node);
    if (auto it = pods_on.find(g.name); it != pods_on.end())
      g.plugin_pods = it->second;
    for (const char* r : {kGpuResource, kSharedGpuResource})
      g.serving |= advertised(node, r).value_or(0) > 0;
    if (g.labelled || g.serving || !g.plugin_pods.empty())
      out.push_back(std::move(g));
  }
  return out;
}

std::string name_list(const std::vector<std::string>& names) {
  constexpr std::size_t kNamed = 6;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kNamed; ++i)
    out += (i == 0 ? "" : ", ") + names[i];
  if (names.size() > kNamed)
    out += " and " + std::to_string(names.size() - kNamed) + " more";
  return out;
}

}  // namespace gpunode
