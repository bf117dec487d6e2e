// What applying the device plugin does to every GPU node: one DaemonSet and
// one ConfigMap serve them all, so a change of variant or replicas changes
// the slots of nodes other than this one (install needs --all-nodes for
// that), and a DaemonSet that gains the GPU-node affinity would leave any
// node that serves GPUs now without the label (the plugin stage labels
// those first). Read with admin credentials.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpunode/kube.hpp"
#include "gpunode/stage.hpp"
#include "stages/plugin_cluster.hpp"

namespace gpunode {

struct NodeSlots {
  std::string node;
  bool this_node = false;
  std::optional<int> gpus;   // labelled (or, for this node, counted)
  std::string now_resource;  // what it advertises now, if anything
  long long now = 0;
  std::optional<long long> after;  // gpus x the plan's replicas
};

struct Rollout {
  std::vector<NodeSlots> nodes;
  // Serving GPUs now, not labelled nvidia.com/gpu.present=true.
  std::vector<std::string> to_label;
  // The cluster's settings (variant, replicas, resource) change.
  bool settings_change = false;
  // GPU nodes other than this one whose slots that change.
  std::vector<std::string> others_changed;
};

Result<Rollout> plan_rollout(Context& ctx, const PluginState& s);

// "node a: nvidia.com/gpu 1 -> nvidia.com/gpu 8 (1 GPU)": one line a node.
std::string slots_line(const NodeSlots& n, const std::string& resource);
kube::json slots_facts(const Rollout& r, const std::string& resource);

// Labels `node` nvidia.com/gpu.present=true (server-side apply).
Result<void> label_gpu_present(kube::Client& kube, const std::string& node,
                               std::chrono::steady_clock::time_point deadline);

}  // namespace gpunode
