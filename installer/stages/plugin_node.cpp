#include "stages/plugin_node.hpp"

#include <algorithm>

#include "plugin/device_plugin_plan.hpp"
#include "plugin/gpu_labels.hpp"
#include "plugin/live_plugin.hpp"
#include "run/cluster_facts.hpp"
#include "run/host_role.hpp"

namespace gpunode {
namespace {

using kube::json;

// How long a node just labelled waits for the DaemonSet controller to start
// its pod: it reacts to a Node label change at once (pkg/controller/daemon
// updateNode), so this is the API server and kubelet's time, not a queue.
constexpr std::chrono::seconds kPodWait{45};

json settings_facts(const LivePlugin& live) {
  json facts = live.exposure->facts();
  facts["config_hash"] = live.config_hash;
  facts["seen_in"] = live.seen_in;
  return facts;
}

}  // namespace

Check check_plugin_from_node(Context& ctx) {
  auto node = ctx.node();
  if (!node) return cluster_blocked(ctx, node.error(), "plugin.node");
  auto live = ctx.live_plugin();
  if (!live) return cluster_blocked(ctx, live.error(), "plugin.node");
  if (!*live) {
    Check c = needed(
        "plugin.no-pod", "no device plugin pod runs on node " + *node + " yet",
        "wait for the cluster part's DaemonSet to start one here (node " +
            *node + " is labelled " + kGpuPresentLabel + "=true)");
    c.details.push_back("if the cluster part has not run: " +
                        cluster_part_command());
    return c;
  }
  const LivePlugin& l = **live;
  const std::string runs = l.exposure->describe();
  const auto asked = make_exposure(ctx.opts.sharing);
  const bool differs = ctx.opts.sharing_given && !asked->same_as(*l.exposure);
  // Only site defaults (config.toml, GPUNODE_*) asked: they do not change
  // the cluster, and the node takes its settings (regression, independent
  // try of issue 26: every agent of a site whose config.toml said
  // time-slicing was blocked under a renamed cluster, told to drop flags
  // it never gave).
  std::string site_warning;
  if (differs && !ctx.opts.sharing_site_origin.empty()) {
    site_warning = "the site default (" + ctx.opts.sharing_site_origin +
                   ") asks for " + asked->describe() + "; the cluster runs " +
                   runs +
                   ", and this node takes the cluster's (one DaemonSet "
                   "serves every GPU node); to change them for all, on a "
                   "server: sudo gpunode install --scope cluster --all-nodes" +
                   asked->install_flags();
  } else if (differs) {
    Check c = blocked(
        "plugin.cluster-settings",
        "the cluster's device plugin runs " + runs + "; this run asks for " +
            asked->describe() +
            ", but one DaemonSet and one ConfigMap serve every GPU node: a "
            "node cannot choose its own",
        "rerun here without --variant/--replicas/--rename-shared to take the "
        "cluster's settings; or change them for every GPU node, on a server: "
        "sudo gpunode install --scope cluster --all-nodes" +
            asked->install_flags());
    c.facts["cluster_plugin"] = settings_facts(l);
    return c;
  }
  Check c =
      satisfied("plugin.ok", "device plugin pod " + l.pod + " runs on node " +
                                 *node + " (the cluster runs " + runs + ")");
  if (!site_warning.empty()) c.warnings.push_back(site_warning);
  if (!l.pod_hash.empty() && l.pod_hash != l.config_hash) {
    c.details.push_back("pod " + l.pod +
                        " started with an earlier config; the DaemonSet "
                        "replaces it (the allocatable stage waits for that)");
  }
  c.facts["cluster_plugin"] = settings_facts(l);
  c.facts["plugin"] = l.exposure->facts();
  c.facts["plugin"]["pod"] = l.pod;
  return c;
}

Result<void> wait_for_plugin_pod(Context& ctx) {
  if (ctx.previewing()) return {};
  auto kube = ctx.cluster();
  if (!kube) return kube.error();
  auto node = ctx.node();
  if (!node) return node.error();
  const auto deadline =
      std::min(ctx.deadline, ctx.host.clock().steady_now() + kPodWait);
  bool found = false;
  auto watched = (*kube)->watch(
      std::string("/api/v1/namespaces/") + kPluginNamespace + "/pods",
      "spec.nodeName=" + *node,
      [&](const std::string& type, const json& pod) {
        if (type == "DELETED") return kube::WatchStep::kContinue;
        const json labels = pod["metadata"].value("labels", json::object());
        found = labels.value("name", "") == "nvidia-device-plugin-ds" &&
                !pod["metadata"].contains("deletionTimestamp");
        return found ? kube::WatchStep::kDone : kube::WatchStep::kContinue;
      },
      deadline);
  if (found) return {};
  if (!watched && watched.error().exit != ExitCode::kTimeout)
    return watched.error();
  return Error{ExitCode::kBlocked, "plugin",
               "no device plugin pod came to node " + *node + " within " +
                   std::to_string(kPodWait.count()) +
                   "s: the cluster part has not applied the DaemonSet, or it "
                   "does not select this node (" +
                   kGpuPresentLabel + "=true)",
               cluster_part_command()};
}

}  // namespace gpunode
