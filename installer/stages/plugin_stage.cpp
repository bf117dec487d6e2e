// plugin: the platform's device plugin manifest (default or time-slicing),
// rendered for --replicas / --rename-shared and applied with server-side
// apply, only when the live objects differ; the stale time-slicing ConfigMap
// removed after a switch to the default variant; and no second NVIDIA device
// plugin left fighting over the same resource.
#include "gpunode/text.hpp"
#include "kube/manifests.hpp"
#include "plugin/gpu_labels.hpp"
#include "plugin/gpu_nodes.hpp"
#include "plugin/live_plugin.hpp"
#include "run/cluster_facts.hpp"
#include "stages/plugin_cluster.hpp"
#include "stages/plugin_node.hpp"
#include "stages/plugin_rollout.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

// What --replace-existing leaves behind: it deletes the other plugin's
// DaemonSet and nothing else, so that nothing gpunode did not make is
// removed on a guess.
std::vector<std::string> replace_leftovers(Context& ctx, const PluginState& s) {
  std::vector<std::string> out;
  if (!ctx.opts.replace_existing) return out;
  for (const auto& o : s.others) {
    if (o.helm_release.empty()) continue;
    out.push_back("--replace-existing deletes only DaemonSet " + o.ns + "/" +
                  o.name + ": Helm release " + o.helm_release +
                  " stays (its release record, its ConfigMaps and namespace " +
                  o.ns +
                  "), and a helm upgrade would bring the DaemonSet back. "
                  "Remove it all: helm -n " +
                  o.helm_namespace + " uninstall " + o.helm_release);
  }
  return out;
}

// kubelet never drops a device plugin resource it has seen: about 5
// minutes after the plugin goes it sets the capacity to 0 and keeps it
// (kubernetes pkg/kubelet/nodestatus/setters.go MachineInfo,
// removedDevicePlugins; devicemanager endpointStopGracePeriod). A replaced
// plugin, or the other variant (--rename-shared), leaves one behind.
std::vector<std::string> stale_resources(
    Context& ctx, const PluginState& s,
    const std::vector<std::string>& foreign) {
  std::vector<std::string> out;
  for (const std::string& found : foreign) {
    const std::string r = found.substr(0, found.find(':'));
    std::string escaped = r;  // JSON pointer: '/' is written "~1"
    for (std::size_t at = 0; (at = escaped.find('/', at)) != std::string::npos;
         at += 2)
      escaped.replace(at, 1, "~1");
    auto known = ctx.node();
    const std::string node = known ? *known : "NODE";
    out.push_back(
        "node " + node + " lists " + found +
        ", which the device plugin gpunode installs (" + s.plan->resource +
        ") does not advertise: once what advertises it is gone, kubelet keeps "
        "it, at 0, for ever, and workloads asking for it stay Pending. It "
        "clears with: kubectl patch node " +
        node +
        " --subresource=status --type=json -p "
        "'[{\"op\":\"remove\",\"path\":\"/status/capacity/" +
        escaped + "\"},{\"op\":\"remove\",\"path\":\"/status/allocatable/" +
        escaped + "\"}]'");
  }
  return out;
}

class PluginStage : public ClusterObjectStage {
 public:
  std::string_view name() const override { return "plugin"; }
  std::string_view layer() const override { return "device plugin"; }
  std::string inputs(Context& ctx) const override {
    return sharing_inputs(ctx.opts.sharing) + "\nimage=" + ctx.opts.image_ref +
           "\nreplace_existing=" +
           (ctx.opts.replace_existing ? "true" : "false") + "\n";
  }

  // The node part reads what the cluster part made, as this node's plugin
  // pod shows it, and waits for that pod (stages/plugin_node.cpp).
 protected:
  Check check_from_node(Context& ctx) override {
    return check_plugin_from_node(ctx);
  }
  Result<void> wait_from_node(Context& ctx, const Check&) override {
    return wait_for_plugin_pod(ctx);
  }

  Check check_cluster_part(Context& ctx) override {
    auto state = read_plugin_state(ctx);
    if (!state) return cluster_blocked(ctx, state.error(), "plugin.manifest");
    const PluginState& s = *state;
    std::vector<std::string> actions;
    kube::json objects{{"create", kube::json::array()},
                       {"update", kube::json::array()},
                       {"delete", kube::json::array()}};
    if (!s.others.empty()) {
      if (!ctx.opts.replace_existing) {
        const auto& o = s.others.front();
        return blocked(
            "plugin.other-installed",
            "another NVIDIA device plugin runs in this cluster: DaemonSet " +
                o.ns + "/" + o.name +
                (o.helm_release.empty()
                     ? ""
                     : " (Helm release " + o.helm_release + ")") +
                "; two plugins on one node fight over the GPU resource",
            (o.helm_release.empty()
                 ? "kubectl -n " + o.ns + " delete daemonset " + o.name
                 : "helm -n " + o.ns + " uninstall " + o.helm_release) +
                ", or rerun gpunode with --replace-existing. To keep that one "
                "instead: "
                "gpunode install --skip plugin, and give the platform "
                "GEO_MLOPS_KUBERNETES_DEVICE_PLUGIN_NAME=" +
                o.name +
                " GEO_MLOPS_KUBERNETES_DEVICE_PLUGIN_NAMESPACE=" + o.ns);
      }
      for (const auto& o : s.others) {
        actions.push_back("delete DaemonSet " + o.ns + "/" + o.name);
        objects["delete"].push_back("DaemonSet " + o.ns + "/" + o.name);
      }
    }
    std::vector<std::string> left = replace_leftovers(ctx, s);
    // Only when something is about to change: a rerun with everything in
    // place asks nothing more (and a switch was warned about when made).
    if (!s.others.empty() || !s.daemonset_matches) {
      auto foreign = foreign_resources(ctx, s);
      if (!foreign) return cluster_blocked(ctx, foreign.error(), "plugin.node");
      for (std::string& w : stale_resources(ctx, s, *foreign))
        left.push_back(std::move(w));
    }
    auto rollout = plan_rollout(ctx, s);
    if (!rollout) return cluster_blocked(ctx, rollout.error(), "plugin.nodes");
    const bool applies =
        !s.daemonset_matches || (s.plan->configmap && !s.configmap_matches);
    if (!s.daemonset_matches && !rollout->to_label.empty()) {
      for (const auto& n : rollout->to_label)
        objects["update"].push_back("Node " + n);
      actions.push_back(
          "label node(s) " + name_list(rollout->to_label) + " " +
          kGpuPresentLabel +
          "=true first: they serve GPUs now, and the DaemonSet's new node "
          "affinity would take the plugin from them");
    }
    if (applies && rollout->settings_change &&
        !rollout->others_changed.empty() && !ctx.opts.all_nodes) {
      const std::string what =
          "this changes the device plugin's settings on " +
          std::to_string(rollout->others_changed.size()) +
          " GPU node(s) besides this one (" +
          name_list(rollout->others_changed) +
          "): one DaemonSet and one ConfigMap serve them all";
      if (!ctx.previewing()) {
        Check b = blocked("plugin.all-nodes", what,
                          "rerun with --all-nodes to change every GPU node "
                          "(gpunode plan shows each node's slots now and "
                          "after), or keep the cluster's settings");
        for (const auto& n : rollout->nodes)
          b.details.push_back(slots_line(n, s.plan->resource));
        b.facts["nodes"] = slots_facts(*rollout, s.plan->resource);
        return b;
      }
      left.push_back(what + "; install needs --all-nodes");
    }
    if (s.plan->configmap && !s.configmap_matches) {
      objects[s.configmap_live ? "update" : "create"].push_back(
          configmap_name());
      actions.push_back(std::string(s.configmap_live ? "update" : "create") +
                        " " + configmap_name() + " (" +
                        std::to_string(s.plan->replicas) + " replicas, " +
                        s.plan->resource + ")");
    }
    if (!s.daemonset_matches) {
      objects[s.daemonset_live ? "update" : "create"].push_back(
          daemonset_name());
      actions.push_back(std::string(s.daemonset_live ? "update" : "create") +
                        " " + daemonset_name() + " (" +
                        s.plan->exposure->name() +
                        " variant; its pods restart with it)");
    }
    if (!s.plan->configmap && s.configmap_live) {
      objects["delete"].push_back(configmap_name());
      actions.push_back("delete the stale " + configmap_name() +
                        " left by the time-slicing variant");
    }
    const std::string what = s.plan->exposure->name() + " variant, " +
                             std::to_string(s.plan->replicas) +
                             " slot(s) per GPU as " + s.plan->resource;
    Check c = actions.empty()
                  ? satisfied("plugin.ok",
                              daemonset_name() + " is applied (" + what + ")")
                  : needed("plugin.apply",
                           "the device plugin is not as wanted (" + what + ")",
                           join(actions, "; "));
    if (s.daemonset_live && !s.daemonset_matches) {
      c.details.push_back(
          "live DaemonSet: " +
          first_difference(*s.daemonset_live, s.plan->daemonset));
    }
    if (s.configmap_live && s.plan->configmap && !s.configmap_matches) {
      c.details.push_back(
          "live ConfigMap: " +
          first_difference(*s.configmap_live, *s.plan->configmap));
    }
    // Each GPU node's slots now and after: worth lines when there are other
    // nodes, or the slots change (the facts always have them).
    if (applies && (rollout->nodes.size() > 1 || rollout->settings_change)) {
      for (const auto& n : rollout->nodes)
        c.details.push_back(slots_line(n, s.plan->resource));
    }
    c.facts["nodes"] = slots_facts(*rollout, s.plan->resource);
    if (auto live = ctx.live_plugin(); live && *live) {
      // The summary says what this run wants; the cluster's, when other.
      if (rollout->settings_change)
        c.details.push_back("the cluster runs " +
                            (*live)->exposure->describe() + " now (" +
                            (*live)->seen_in + ")");
      c.facts["cluster_plugin"] = (*live)->exposure->facts();
      c.facts["cluster_plugin"]["config_hash"] = (*live)->config_hash;
      c.facts["cluster_plugin"]["seen_in"] = (*live)->seen_in;
    }
    add_platform_settings(c, s.plan->resource);
    c.warnings.insert(c.warnings.end(), left.begin(), left.end());
    c.facts["plugin"] = s.plan->exposure->facts();
    c.facts["plugin"]["config_hash"] = s.plan->config_hash;
    c.facts["plugin"]["image"] = s.plan->image;
    c.facts["plugin"]["manifests"] = s.plan->manifests_origin;
    if (!actions.empty()) c.facts["objects"] = objects;
    return c;
  }

  Result<void> apply_cluster_part(Context& ctx, const Check&) override {
    auto state = read_plugin_state(ctx);
    if (!state) return state.error();
    auto kube = ctx.cluster();
    if (!kube) return kube.error();
    const PluginState& s = *state;
    // Before the DaemonSet gains its node affinity: no node that serves GPUs
    // now may lose its plugin.
    if (!s.daemonset_matches) {
      auto rollout = plan_rollout(ctx, s);
      if (!rollout) return rollout.error();
      for (const auto& n : rollout->to_label) {
        auto r = label_gpu_present(**kube, n, ctx.deadline);
        if (!r) return r.error();
      }
    }
    if (ctx.opts.replace_existing) {
      for (const auto& o : s.others) {
        auto r = (*kube)->remove(
            "/apis/apps/v1/namespaces/" + o.ns + "/daemonsets/" + o.name,
            ctx.deadline);
        if (!r) return r.error();
      }
    }
    // The ConfigMap first: the restarted pods read it when they start.
    if (s.plan->configmap && !s.configmap_matches) {
      auto r = (*kube)->apply(object_path(*s.plan->configmap),
                              *s.plan->configmap, ctx.deadline);
      if (!r) return r.error();
    }
    if (!s.daemonset_matches) {
      auto r = (*kube)->apply(object_path(s.plan->daemonset), s.plan->daemonset,
                              ctx.deadline);
      if (!r) return r.error();
    }
    if (!s.plan->configmap && s.configmap_live) {
      auto r = (*kube)->remove(configmap_path(), ctx.deadline);
      if (!r) return r.error();
    }
    // Labels and the DaemonSet changed: the next stage expects anew.
    ctx.refresh_expected_slots();
    return {};
  }
};

}  // namespace

std::unique_ptr<Stage> make_plugin_stage() {
  return std::make_unique<PluginStage>();
}

}  // namespace gpunode
