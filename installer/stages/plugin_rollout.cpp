#include "stages/plugin_rollout.hpp"

#include "plugin/gpu_labels.hpp"
#include "plugin/live_plugin.hpp"
#include "plugin/slot_expectation.hpp"

namespace gpunode {

using kube::json;

Result<Rollout> plan_rollout(Context& ctx, const PluginState& s) {
  auto want = ctx.expected_slots();
  if (!want) return want.error();
  auto live = ctx.live_plugin();
  if (!live) return live.error();
  Rollout out;
  if (*live)
    out.settings_change = !(*live)->exposure->same_as(*s.plan->exposure);
  const bool adds_affinity =
      s.daemonset_live &&
      !selects_gpu_nodes((*s.daemonset_live)["spec"]["template"].value(
          "spec", json::object()));
  for (const NodeExpectation& e : (*want)->listed) {
    NodeSlots n;
    n.node = e.node;
    n.this_node = e.this_node;
    n.gpus = e.gpus;
    n.now_resource = e.now_resource;
    n.now = e.now;
    n.after = e.expected;
    // A node the new affinity would leave: it serves now, but lacks the label
    // (applied by an earlier gpunode, by hand, or a node not yet labelled).
    if (e.serving && !e.labelled && (adds_affinity || !s.daemonset_live) &&
        !n.this_node)
      out.to_label.push_back(e.node);
    if (out.settings_change && !n.this_node && (e.serving || e.labelled))
      out.others_changed.push_back(e.node);
    out.nodes.push_back(std::move(n));
  }
  return out;
}

std::string slots_line(const NodeSlots& n, const std::string& resource) {
  const std::string now = n.now_resource.empty()
                              ? "none"
                              : n.now_resource + " " + std::to_string(n.now);
  const std::string after =
      n.after ? resource + " " + std::to_string(*n.after) + " (" +
                    std::to_string(*n.gpus) + " GPU)"
              : "unknown (not labelled with its GPU count: run gpunode "
                "install on it)";
  return "node " + n.node + (n.this_node ? " (this node)" : "") + ": " + now +
         " -> " + after;
}

json slots_facts(const Rollout& r, const std::string& resource) {
  json nodes = json::array();
  for (const NodeSlots& n : r.nodes) {
    json j{{"node", n.node},
           {"this_node", n.this_node},
           {"gpus", n.gpus ? json(*n.gpus) : json(nullptr)},
           {"now",
            {{"resource",
              n.now_resource.empty() ? json(nullptr) : json(n.now_resource)},
             {"count", n.now}}},
           {"after",
            {{"resource", resource},
             {"count", n.after ? json(*n.after) : json(nullptr)}}}};
    nodes.push_back(std::move(j));
  }
  return nodes;
}

Result<void> label_gpu_present(kube::Client& kube, const std::string& node,
                               std::chrono::steady_clock::time_point deadline) {
  const json patch{
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", node}, {"labels", {{kGpuPresentLabel, "true"}}}}}};
  auto r = kube.apply("/api/v1/nodes/" + node, patch, deadline);
  if (!r) return r.error();
  return {};
}

}  // namespace gpunode
