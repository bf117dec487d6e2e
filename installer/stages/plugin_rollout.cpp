#include "stages/plugin_rollout.hpp"

#include "plugin/gpu_labels.hpp"
#include "plugin/gpu_nodes.hpp"
#include "plugin/live_plugin.hpp"

namespace gpunode {

using kube::json;

Result<Rollout> plan_rollout(Context& ctx, const PluginState& s) {
  auto kube = ctx.cluster();
  if (!kube) return kube.error();
  auto nodes = list_gpu_nodes(**kube, ctx.deadline);
  if (!nodes) return nodes.error();
  std::optional<std::string> self;
  std::optional<int> own_gpus;
  if (has_node_part(ctx.scope())) {
    if (auto name = ctx.node()) self = *name;
    if (auto gpus = ctx.gpus())
      own_gpus = static_cast<int>((*gpus)->gpus.size());
  }
  auto live = ctx.live_plugin();
  if (!live) return live.error();
  Rollout out;
  if (*live) {
    out.settings_change = !(*live)->exposure->same_as(*s.plan->exposure);
  }
  const bool adds_affinity =
      s.daemonset_live &&
      !selects_gpu_nodes((*s.daemonset_live)["spec"]["template"].value(
          "spec", json::object()));
  for (const GpuNode& g : *nodes) {
    NodeSlots n;
    n.node = g.name;
    n.this_node = self && *self == g.name;
    n.gpus = n.this_node && own_gpus ? own_gpus : g.gpus;
    for (const char* r : {kGpuResource, kSharedGpuResource}) {
      const long long have = advertised(g.node, r).value_or(0);
      if (have > 0) {
        n.now_resource = r;
        n.now = have;
      }
    }
    if (n.gpus) n.after = s.plan->slots_for(*n.gpus);
    // A node the new affinity would leave: it serves now, but lacks the label
    // (applied by an earlier gpunode, by hand, or a node not yet labelled).
    if (g.serving && !g.labelled && (adds_affinity || !s.daemonset_live) &&
        !n.this_node)
      out.to_label.push_back(g.name);
    if (out.settings_change && !n.this_node && (g.serving || g.labelled))
      out.others_changed.push_back(g.name);
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
