// The cluster's GPU nodes as an admin sees them: the nodes labelled
// nvidia.com/gpu.present=true (plugin/gpu_labels.hpp), the nodes a plugin
// pod of ours runs on, and the nodes that advertise an nvidia.com/ GPU
// resource (served by an earlier install, perhaps before the labels).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/kube.hpp"

namespace gpunode {

struct GpuNode {
  std::string name;
  kube::json node;                       // as listed
  bool labelled = false;                 // nvidia.com/gpu.present=true
  std::optional<int> gpus;               // its nvidia.com/gpu.count label
  std::vector<std::string> plugin_pods;  // our DaemonSet's pods bound to it
  // It advertises nvidia.com/gpu or nvidia.com/gpu.shared above 0: it
  // serves GPUs now.
  bool serving = false;
};

Result<std::vector<GpuNode>> list_gpu_nodes(
    kube::Client& kube, std::chrono::steady_clock::time_point deadline);

// A node's allocatable count of `resource`, when it lists one.
std::optional<long long> advertised(const kube::json& node,
                                    const std::string& resource);

// "a, b and 3 more": node names for one line.
std::string name_list(const std::vector<std::string>& names);

}  // namespace gpunode
