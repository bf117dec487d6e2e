#include "cluster_bed.hpp"

#include <catch2/catch.hpp>

#include "gpunode/images_lock.hpp"
#include "stages/plugin_cluster.hpp"

namespace gpunode::test {

using kube::json;

ClusterBed::ClusterBed(int gpus)
    : kube_(std::make_shared<FakeKubeClient>(bed_.clock)) {
  // The scratch root has no /etc/rancher/k3s/config.yaml: the node name is
  // the host name, as on a k3s server without node-name set.
  opts.root = bed_.root;
  opts.image_ref = locked_device_plugin_image().ref;
  opts.smoke_image = locked_cuda_sample_image().ref;
  gpus_.source = "NVML";
  gpus_.driver_version = "580.95.05";
  for (int i = 0; i < gpus; ++i) {
    GpuInfo g;
    g.index = i;
    g.name = "NVIDIA H100 80GB HBM3";
    g.uuid = "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i);
    g.memory_mib = 81559;
    g.mig = GpuInfo::Mig::kDisabled;
    gpus_.gpus.push_back(g);
  }
  // A cluster of this one node: what a run with the cluster part lists to
  // find every GPU node (plugin/gpu_nodes.cpp) says so, until a test says
  // otherwise.
  kube_->answer_list("/api/v1/nodes", {});
  kube_->answer_list(all_plugin_pods_path(), {});
}

void ClusterBed::sharing(Variant variant, int replicas, bool rename_shared) {
  opts.sharing.variant = variant;
  opts.sharing.replicas = replicas;
  opts.sharing.rename = rename_shared;
}

void ClusterBed::bundle_unusable() {
  opts.bundle = bed_.tmp.path() + "/no-such-bundle";
  opts.insecure_skip_signature = true;
}

Context& ClusterBed::context() {
  if (!context_) {
    // What the GPU probe and the cluster connection would have found.
    KnownFacts known;
    if (gpus_known_) known.gpus = gpus_;
    known.cluster = kube_;
    context_ = std::make_unique<Context>(bed_.host, opts,
                                         bed_.clock.steady_now() + opts.timeout,
                                         std::move(known), writes_);
  }
  return *context_;
}

void ClusterBed::cluster_down() {
  context().mark_cluster_down(
      FakeKubeClient::connection_error(KubeVerb::kList, "/api/v1/nodes"));
}

DevicePluginPlan ClusterBed::rendered() const {
  auto r = plan_device_plugin(opts.sharing, opts.image_ref);
  REQUIRE(r);
  return *r;
}

json ClusterBed::rendered_runtimeclass() {
  auto r = render_runtimeclass();
  REQUIRE(r);
  return *r;
}

void ClusterBed::plugin_applied() {
  const DevicePluginPlan r = rendered();
  kube_->put(daemonset_path(), r.daemonset);
  if (r.configmap) {
    kube_->put(configmap_path(), *r.configmap);
  } else {
    kube_->put_absent(configmap_path());
  }
}

void ClusterBed::plugin_absent() {
  kube_->put_absent(daemonset_path());
  kube_->put_absent(configmap_path());
}

void ClusterBed::other_daemonsets(const std::vector<OtherPluginSet>& others) {
  std::vector<json> items;
  for (const auto& o : others) items.push_back(daemonset_object(o));
  kube_->answer_list("/apis/apps/v1/daemonsets", items);
}

void ClusterBed::node_advertises(
    const std::map<std::string, long long>& resources) {
  kube_->put(node_path(), node_object(resources));
  kube_->answer_list("/api/v1/nodes", {node_object(resources)});
}

void ClusterBed::node_missing(const std::vector<std::string>& nodes_there) {
  kube_->put_absent(node_path());
  std::vector<json> items;
  for (const auto& name : nodes_there)
    items.push_back({{"metadata", {{"name", name}}}});
  kube_->answer_list("/api/v1/nodes", items);
}

void ClusterBed::plugin_pods(const std::vector<PluginPod>& pods) {
  std::vector<json> items;
  for (const auto& p : pods) items.push_back(pod_object(p));
  kube_->answer_list(plugin_pods_path(), items);
  kube_->answer_list(all_plugin_pods_path(), items);
}

void ClusterBed::events_about(
    const std::string& name,
    const std::vector<std::pair<std::string, std::string>>&
        reason_and_message) {
  std::vector<json> items;
  for (const auto& [reason, message] : reason_and_message) {
    items.push_back({{"involvedObject", {{"name", name}}},
                     {"reason", reason},
                     {"message", message}});
  }
  kube_->answer_list(events_path(name), items);
}

void ClusterBed::pod_log(const std::string& pod, const std::string& text) {
  kube_->answer_text(pod_log_path(pod), text);
}

void ClusterBed::pod_log_unreadable(const std::string& pod) {
  kube_->answer_status(KubeVerb::kGetText, pod_log_path(pod), 400,
                       "container \"nvidia-device-plugin-ctr\" in pod \"" +
                           pod + "\" is waiting to start");
}

json ClusterBed::node_object(
    const std::map<std::string, long long>& resources) const {
  // Quantities are strings in a Node's status.
  json counts = {{"cpu", "64"}, {"memory", "527981524Ki"}};
  for (const auto& [name, n] : resources) counts[name] = std::to_string(n);
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", node_}}},
          {"status", {{"capacity", counts}, {"allocatable", counts}}}};
}

json ClusterBed::pod_object(const PluginPod& pod) const {
  json status = {{"phase", pod.phase}};
  json state = json::object();
  if (!pod.waiting_reason.empty()) {
    state["waiting"] = {{"reason", pod.waiting_reason}};
    if (!pod.waiting_message.empty())
      state["waiting"]["message"] = pod.waiting_message;
  } else if (pod.phase == "Running") {
    state["running"] = {{"startedAt", "2026-12-01T12:00:00Z"}};
  }
  status["containerStatuses"] =
      json::array({{{"name", "nvidia-device-plugin-ctr"}, {"state", state}}});
  json metadata = {{"name", pod.name},
                   {"namespace", kPluginNamespace},
                   {"labels", {{"name", "nvidia-device-plugin-ds"}}},
                   {"annotations",
                    {{kConfigHashAnnotation,
                      pod.config_hash.value_or(rendered().config_hash)}}}};
  if (pod.deleting) metadata["deletionTimestamp"] = "2026-12-01T12:05:00Z";
  json spec = {{"nodeName", node_}};
  if (!pod.runtime_class.empty()) spec["runtimeClassName"] = pod.runtime_class;
  // The template's volumes: what tells a node which ConfigMap its plugin
  // reads (plugin/live_plugin.cpp).
  const json tmpl = rendered().daemonset["spec"]["template"]["spec"];
  if (tmpl.contains("volumes")) spec["volumes"] = tmpl["volumes"];
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", metadata},
          {"spec", spec},
          {"status", status}};
}

json ClusterBed::daemonset_object(const OtherPluginSet& other) {
  json metadata = {{"name", other.name}, {"namespace", other.ns}};
  if (!other.helm_release.empty()) {
    metadata["annotations"] = {
        {"meta.helm.sh/release-name", other.helm_release},
        {"meta.helm.sh/release-namespace", other.ns}};
    metadata["labels"] = {{"app.kubernetes.io/managed-by", "Helm"}};
  }
  return {{"apiVersion", "apps/v1"},
          {"kind", "DaemonSet"},
          {"metadata", metadata},
          {"spec",
           {{"template",
             {{"spec",
               {{"containers",
                 json::array(
                     {{{"name", "nvidia-device-plugin-ctr"},
                       {"image",
                        "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}}})}}}}}}}};
}

std::string ClusterBed::all_plugin_pods_path() {
  return std::string("/api/v1/namespaces/") + kPluginNamespace +
         "/pods?labelSelector=name%3Dnvidia-device-plugin-ds";
}

std::string ClusterBed::plugin_pods_path() const {
  return std::string("/api/v1/namespaces/") + kPluginNamespace +
         "/pods?labelSelector=name%3Dnvidia-device-plugin-ds&fieldSelector="
         "spec.nodeName%3D" +
         node_;
}

std::string ClusterBed::events_path(const std::string& name) {
  return std::string("/api/v1/namespaces/") + kPluginNamespace +
         "/events?fieldSelector=involvedObject.name%3D" + name;
}

std::string ClusterBed::pod_log_path(const std::string& pod) {
  return std::string("/api/v1/namespaces/") + kPluginNamespace + "/pods/" +
         pod + "/log?tailLines=20";
}

}  // namespace gpunode::test
