#include "plugin/live_plugin.hpp"

#include <yaml-cpp/yaml.h>

#include "plugin/device_plugin_plan.hpp"

namespace gpunode {
namespace {

using kube::json;

bool mounts_plugin_config(const json& pod_spec) {
  for (const auto& v : pod_spec.value("volumes", json::array())) {
    if (v.value("configMap", json::object()).value("name", "") ==
        kPluginConfigMap)
      return true;
  }
  return false;
}

Error unreadable(const std::string& why) {
  return Error{ExitCode::kBlocked, "plugin",
               "the live " + configmap_name() + " cannot be read: " + why,
               "kubectl -n kube-system get configmap " +
                   std::string(kPluginConfigMap) + " -o yaml"};
}

Result<std::optional<json>> get_configmap(
    kube::Client& kube, std::chrono::steady_clock::time_point deadline) {
  auto cm = kube.get(configmap_path(), deadline);
  if (!cm) return cm.error();
  return *cm;
}

// The settings a pod spec (the DaemonSet's template, or a pod of it) runs:
// its ConfigMap read when it mounts one.
Result<LivePlugin> settings_of(kube::Client& kube, const json& pod_spec,
                               std::chrono::steady_clock::time_point deadline);

}  // namespace

Result<Sharing> sharing_of(const json& pod_spec,
                           const std::optional<json>& configmap) {
  Sharing s;
  if (!mounts_plugin_config(pod_spec)) return s;
  if (!configmap) return unreadable("the plugin pods mount it, but it is gone");
  const json data = configmap->value("data", json::object());
  if (!data.contains("config.yaml") || !data["config.yaml"].is_string())
    return unreadable("it has no config.yaml");
  try {
    const YAML::Node config =
        YAML::Load(data["config.yaml"].get<std::string>());
    const YAML::Node sharing = config["sharing"];
    const YAML::Node slicing =
        sharing && sharing.IsMap() ? sharing["timeSlicing"] : YAML::Node();
    if (!slicing || !slicing.IsMap())
      return unreadable("its config.yaml shares no " +
                        std::string(kGpuResource));
    s.variant = Variant::kTimeSlicing;
    s.rename =
        slicing["renameByDefault"] && slicing["renameByDefault"].as<bool>();
    s.replicas = 0;
    for (const auto& r : slicing["resources"]) {
      if (r["name"] && r["name"].as<std::string>() == kGpuResource)
        s.replicas = r["replicas"].as<int>();
    }
    if (s.replicas < 1)
      return unreadable("its config.yaml shares no " +
                        std::string(kGpuResource));
  } catch (const YAML::Exception& e) {
    return unreadable("its config.yaml is not as the plugin reads it: " +
                      e.msg);
  }
  return s;
}

Result<std::optional<LivePlugin>> read_cluster_plugin(
    kube::Client& kube, std::chrono::steady_clock::time_point deadline) {
  auto ds = kube.get(daemonset_path(), deadline);
  if (!ds) return ds.error();
  if (!*ds) return std::optional<LivePlugin>();
  auto out = settings_of(
      kube, (**ds)["spec"]["template"].value("spec", json::object()), deadline);
  if (!out) return out.error();
  out->seen_in = daemonset_name();
  return std::optional<LivePlugin>(*out);
}

Result<std::optional<LivePlugin>> read_node_plugin(
    kube::Client& kube, const std::string& node,
    std::chrono::steady_clock::time_point deadline) {
  auto pods = kube.list(plugin_pods_path(node), deadline);
  if (!pods) return pods.error();
  const json items = pods->value("items", json::array());
  const json* pod = nullptr;
  for (const auto& p : items) {
    if (p["metadata"].contains("deletionTimestamp")) continue;
    pod = &p;
    break;
  }
  if (pod == nullptr) return std::optional<LivePlugin>();
  auto found = settings_of(kube, pod->value("spec", json::object()), deadline);
  if (!found) return found.error();
  LivePlugin out = *found;
  out.pod = (*pod)["metadata"].value("name", "");
  out.pod_hash = (*pod)["metadata"]
                     .value("annotations", json::object())
                     .value(kConfigHashAnnotation, "");
  out.seen_in = "pod " + out.pod + " on node " + node;
  return std::optional<LivePlugin>(out);
}

namespace {

Result<LivePlugin> settings_of(kube::Client& kube, const json& pod_spec,
                               std::chrono::steady_clock::time_point deadline) {
  std::optional<json> cm;
  if (mounts_plugin_config(pod_spec)) {
    auto live = get_configmap(kube, deadline);
    if (!live) return live.error();
    cm = *live;
  }
  auto sharing = sharing_of(pod_spec, cm);
  if (!sharing) return sharing.error();
  LivePlugin out;
  out.sharing = *sharing;
  out.config_hash = plugin_config_hash(cm ? &*cm : nullptr);
  return out;
}

}  // namespace

std::string describe(const Sharing& s) {
  return std::string(variant_name(s.variant)) + ", " +
         std::to_string(s.time_slicing() ? s.replicas : 1) +
         " slot(s) per GPU as " + s.resource();
}

}  // namespace gpunode
