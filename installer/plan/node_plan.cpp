#include "plan/node_plan.hpp"

#include "plugin/device_plugin_plan.hpp"
#include "plugin/gpu_labels.hpp"
#include "plugin/slot_expectation.hpp"

namespace gpunode {

NodePlan plan_node(const std::string& node, const GpuInventory& gpus,
                   const Options& opts) {
  NodePlan plan;
  plan.node = node;
  plan.labels = gpu_labels_for(gpus);
  plan.annotations = gpu_annotations_for(gpus);
  plan.plugin_image = opts.image_ref;
  if (opts.smoke) plan.smoke_image = opts.smoke_image;
  return plan;
}

std::vector<ClusterObject> owned_cluster_objects() {
  return {
      {"RuntimeClass nvidia", runtimeclass_path()},
      {configmap_name(), configmap_path()},
      {daemonset_name(), daemonset_path()},
  };
}

namespace {

nlohmann::json node_slots_json(const NodeExpectation& n) {
  nlohmann::json j{{"node", n.node}, {"this_node", n.this_node}};
  j["now"] = n.now_known ? nlohmann::json(n.now) : nlohmann::json();
  j["now_resource"] =
      n.now_known ? nlohmann::json(n.now_resource) : nlohmann::json();
  j["gpus"] = n.gpus ? nlohmann::json(*n.gpus) : nlohmann::json();
  j["after"] = n.expected ? nlohmann::json(*n.expected) : nlohmann::json();
  return j;
}

}  // namespace

nlohmann::json plan_json(const NodePlan* node, const SlotExpectation* slots) {
  nlohmann::json out = nlohmann::json::object();
  if (node != nullptr) {
    out["node"] = {{"name", node->node},
                   {"runtime_handler", node->runtime_handler},
                   {"labels", node->labels},
                   {"annotations", node->annotations},
                   {"plugin_image", node->plugin_image}};
    out["node"]["smoke_image"] = node->smoke_image
                                     ? nlohmann::json(*node->smoke_image)
                                     : nlohmann::json();
  }
  if (slots != nullptr) {
    if (slots->plan != nullptr) out["resource"] = slots->plan->resource;
    nlohmann::json nodes = nlohmann::json::array();
    if (!slots->listed.empty()) {
      for (const NodeExpectation& n : slots->listed)
        nodes.push_back(node_slots_json(n));
    } else if (slots->self) {
      nodes.push_back(node_slots_json(*slots->self));
    }
    out["nodes"] = nodes;
  }
  return out;
}

}  // namespace gpunode
