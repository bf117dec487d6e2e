// This host's part of the run's plan: what the node part is to make true
// here, decided once from the options and the facts (the node's name, the
// GPUs the driver layer counts), after ninja's Plan and kubeadm's InitData.
// The stages check and apply it; they do not decide it (the labels stage
// applies `labels`, uninstall walks owned_cluster_objects() backwards).
// The cluster's part is plugin_plan() and expected_slots() beside it in
// Context; `plan` prints both (plan_json).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/gpu.hpp"
#include "gpunode/options.hpp"

namespace gpunode {

struct SlotExpectation;

struct NodePlan {
  std::string node;
  // The containerd runtime handler k3s renders for the toolkit, and the
  // RuntimeClass's handler: FACTS.md, k3s's nvidia runtime detection.
  std::string runtime_handler = "nvidia";
  // GPU Feature Discovery's labels for the counted GPUs (plugin/
  // gpu_labels.hpp): the DaemonSet's node affinity follows them.
  std::map<std::string, std::string> labels;
  // What the node publishes beside them (plugin/gpu_labels.hpp): its GPUs'
  // UUIDs, which the cluster part's proof covers.
  std::map<std::string, std::string> annotations;
  // This node's evidence key's public half (evidence/evidence_key.hpp),
  // published beside them; nullopt until the labels stage makes the key.
  std::optional<std::string> evidence_key;
  std::string plugin_image;
  std::optional<std::string> smoke_image;  // with --smoke
};

NodePlan plan_node(const std::string& node, const GpuInventory& gpus,
                   const Options& opts);

// An object gpunode owns in the cluster, as messages name it and its API
// path.
struct ClusterObject {
  std::string what;
  std::string path;
};
// In the order the cluster part makes them: the RuntimeClass, the plugin's
// ConfigMap, its DaemonSet. Uninstall removes them in the reverse order.
std::vector<ClusterObject> owned_cluster_objects();

// The plan as `plan --json` prints it (docs/json-events.md, the result's
// plan.node and plan.nodes): what is known of it, absent parts omitted.
nlohmann::json plan_json(const NodePlan* node, const SlotExpectation* slots);

}  // namespace gpunode
