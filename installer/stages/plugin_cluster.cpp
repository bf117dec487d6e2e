#include "stages/plugin_cluster.hpp"

#include "kube/manifests.hpp"
#include "run/cluster_facts.hpp"

namespace gpunode {

namespace {

bool is_nvidia_plugin(const kube::json& ds) {
  for (const auto& c : ds["spec"]["template"]["spec"].value(
           "containers", kube::json::array())) {
    if (c.value("image", "").find("k8s-device-plugin") != std::string::npos)
      return true;
  }
  return false;
}

}  // namespace

Result<PluginState> read_plugin_state(Context& ctx) {
  auto kube = ctx.cluster();
  if (!kube) return kube.error();
  auto plan = ctx.plugin_plan();
  if (!plan) return plan.error();
  PluginState s;
  s.plan = *plan;

  auto all = (*kube)->list("/apis/apps/v1/daemonsets", ctx.deadline);
  if (!all) return all.error();
  for (const auto& ds : all->value("items", kube::json::array())) {
    const auto& meta = ds["metadata"];
    const std::string ns = meta.value("namespace", ""),
                      name = meta.value("name", "");
    if (ns == kPluginNamespace && name == kPluginDaemonSet) continue;
    if (!is_nvidia_plugin(ds)) continue;
    OtherPlugin o{ns, name, "", ns};
    const auto annotations = meta.value("annotations", kube::json::object());
    const auto labels = meta.value("labels", kube::json::object());
    // Helm stamps both on what it installs (helm.sh/helm pkg/action
    // ownership annotations); the label is the chart's convention.
    o.helm_release =
        annotations.value("meta.helm.sh/release-name",
                          labels.value("app.kubernetes.io/instance", ""));
    o.helm_namespace = annotations.value("meta.helm.sh/release-namespace", ns);
    s.others.push_back(o);
  }
  auto ds = (*kube)->get(daemonset_path(), ctx.deadline);
  if (!ds) return ds.error();
  s.daemonset_live = *ds;
  s.daemonset_matches = *ds && holds_all_of(**ds, s.plan->daemonset);

  auto cm = (*kube)->get(configmap_path(), ctx.deadline);
  if (!cm) return cm.error();
  s.configmap_live = *cm;
  s.configmap_matches =
      s.plan->configmap && *cm && holds_all_of(**cm, *s.plan->configmap);
  return s;
}

Result<std::vector<std::string>> foreign_resources(Context& ctx,
                                                   const PluginState& s) {
  std::vector<std::string> out;
  auto kube = ctx.cluster();
  if (!kube) return kube.error();
  auto node = ctx.node();
  if (!node) return node.error();
  auto live = (*kube)->get("/api/v1/nodes/" + *node, ctx.deadline);
  if (!live) return live.error();
  if (!*live) return out;
  const kube::json status = (**live).value("status", kube::json::object());
  const kube::json capacity = status.value("capacity", kube::json::object());
  for (auto it = capacity.begin(); it != capacity.end(); ++it) {
    const std::string& name = it.key();
    if (name.rfind("nvidia.com/", 0) == 0 && name != s.plan->resource)
      out.push_back(name + ": " +
                    (it.value().is_string() ? it.value().get<std::string>()
                                            : it.value().dump()));
  }
  return out;
}

void add_platform_settings(Check& c, const std::string& resource) {
  if (resource != "nvidia.com/gpu") {
    c.warnings.push_back("the GPU resource is " + resource +
                         ": set GEO_MLOPS_SERVING_GPU_RESOURCE=" + resource +
                         " for the platform, and request " + resource +
                         " (not nvidia.com/gpu) in workloads");
  }
}

}  // namespace gpunode
