#include "plugin/live_plugin.hpp"

#include <algorithm>

#include "gpunode/host.hpp"
#include "plugin/device_plugin_plan.hpp"

namespace gpunode {
namespace {

using kube::json;

// How long a kubelet's refused ConfigMap read is asked again, and how often
// (the Node authorizer's graph follows the pod within milliseconds).
constexpr std::chrono::seconds kAuthorizerLag{5};
constexpr std::chrono::milliseconds kAuthorizerPoll{250};

// `clock`: ask again while the answer is 403 (the node's identity), for at
// most kAuthorizerLag; null: the first answer counts (admin credentials,
// where a 403 is RBAC's own).
Result<std::optional<json>> get_configmap(
    kube::Client& kube, Clock* clock,
    std::chrono::steady_clock::time_point deadline) {
  const auto until =
      clock ? std::min(deadline, clock->steady_now() + kAuthorizerLag)
            : deadline;
  for (;;) {
    auto cm = kube.get(configmap_path(), deadline);
    if (cm) return *cm;
    if (!clock || cm.error().status != 403 ||
        clock->steady_now() + kAuthorizerPoll > until)
      return cm.error();
    clock->sleep_for(kAuthorizerPoll);
  }
}

// The settings a pod spec (the DaemonSet's template, or a pod of it) runs:
// its ConfigMap read when it mounts one.
Result<LivePlugin> settings_of(kube::Client& kube, const json& pod_spec,
                               Clock* clock,
                               std::chrono::steady_clock::time_point deadline);

}  // namespace

Result<Sharing> sharing_of(const json& pod_spec,
                           const std::optional<json>& configmap) {
  return recognize_exposure(pod_spec, configmap);
}

Result<std::optional<LivePlugin>> read_cluster_plugin(
    kube::Client& kube, std::chrono::steady_clock::time_point deadline) {
  auto ds = kube.get(daemonset_path(), deadline);
  if (!ds) return ds.error();
  if (!*ds) return std::optional<LivePlugin>();
  auto out = settings_of(
      kube, (**ds)["spec"]["template"].value("spec", json::object()), nullptr,
      deadline);
  if (!out) return out.error();
  out->seen_in = daemonset_name();
  return std::optional<LivePlugin>(*out);
}

Result<std::optional<LivePlugin>> read_node_plugin(
    kube::Client& kube, const std::string& node, Clock& clock,
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
  auto found =
      settings_of(kube, pod->value("spec", json::object()), &clock, deadline);
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
                               Clock* clock,
                               std::chrono::steady_clock::time_point deadline) {
  std::optional<json> cm;
  if (mounts_plugin_config(pod_spec)) {
    auto live = get_configmap(kube, clock, deadline);
    if (!live) return live.error();
    cm = *live;
  }
  auto sharing = sharing_of(pod_spec, cm);
  if (!sharing) return sharing.error();
  LivePlugin out;
  out.sharing = *sharing;
  out.exposure = make_exposure(*sharing);
  out.config_hash = plugin_config_hash(cm ? &*cm : nullptr);
  return out;
}

}  // namespace

std::string describe(const Sharing& s) { return make_exposure(s)->describe(); }

}  // namespace gpunode
