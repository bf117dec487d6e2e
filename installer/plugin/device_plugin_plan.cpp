#include "plugin/device_plugin_plan.hpp"

#include "gpunode/digest.hpp"
#include "kube/manifests.hpp"
#include "plugin/gpu_labels.hpp"

namespace gpunode {

using kube::json;

std::string plugin_config_hash(const kube::json* configmap) {
  return sha256_hex(configmap ? configmap->at("data").dump()
                              : std::string("variant=default"));
}

std::string plugin_pods_path(const std::string& node) {
  std::string path = std::string("/api/v1/namespaces/") + kPluginNamespace +
                     "/pods?labelSelector=name%3Dnvidia-device-plugin-ds";
  if (!node.empty()) path += "&fieldSelector=spec.nodeName%3D" + node;
  return path;
}

bool mounts_plugin_config(const json& pod_spec) {
  for (const auto& v : pod_spec.value("volumes", json::array())) {
    if (v.value("configMap", json::object()).value("name", "") ==
        kPluginConfigMap)
      return true;
  }
  return false;
}

Error live_config_unreadable(const std::string& why) {
  return Error{ExitCode::kBlocked, "plugin",
               "the live " + configmap_name() + " cannot be read: " + why,
               "kubectl -n kube-system get configmap " +
                   std::string(kPluginConfigMap) + " -o yaml"};
}

std::string runtimeclass_path() {
  return "/apis/node.k8s.io/v1/runtimeclasses/nvidia";
}

std::string daemonset_path() {
  return std::string("/apis/apps/v1/namespaces/") + kPluginNamespace +
         "/daemonsets/" + kPluginDaemonSet;
}

std::string configmap_path() {
  return std::string("/api/v1/namespaces/") + kPluginNamespace +
         "/configmaps/" + kPluginConfigMap;
}

std::string daemonset_name() {
  return std::string("DaemonSet ") + kPluginNamespace + "/" + kPluginDaemonSet;
}

std::string configmap_name() {
  return std::string("ConfigMap ") + kPluginNamespace + "/" + kPluginConfigMap;
}

Result<DevicePluginPlan> plan_device_plugin(const Sharing& sharing,
                                            const std::string& image,
                                            const ManifestTexts& texts) {
  DevicePluginPlan out;
  out.sharing = sharing;
  out.exposure = make_exposure(sharing);
  out.image = image;
  out.manifests_origin = texts.origin;
  out.replicas = out.exposure->slots_per_gpu();
  out.resource = out.exposure->resource();
  auto objects = out.exposure->objects(texts);
  if (!objects) return objects.error();
  out.daemonset = std::move(objects->daemonset);
  out.configmap = std::move(objects->configmap);
  if (out.configmap) label_managed(*out.configmap);
  if (out.daemonset.is_null()) {
    return Error{ExitCode::kUsage,
                 "plugin",
                 "the device plugin manifest has no DaemonSet",
                 {}};
  }
  // The plugin reads its config only at start: a digest of it on the pod
  // template makes every config change a new template, so the DaemonSet
  // controller restarts the pods (no manual `rollout restart`).
  out.config_hash =
      plugin_config_hash(out.configmap ? &*out.configmap : nullptr);
  json& ds = out.daemonset;
  label_managed(ds);
  ds["spec"]["template"]["metadata"]["annotations"][kConfigHashAnnotation] =
      out.config_hash;
  // Only on GPU nodes: on a CPU-only node the pod would wait for ever for a
  // runtime that is not there ("no runtime for \"nvidia\" is configured").
  // A bundle made before this carries manifests without it: added here too.
  require_gpu_nodes(ds["spec"]["template"]["spec"]);
  for (auto& c : ds["spec"]["template"]["spec"]["containers"]) {
    if (c.value("name", "") == "nvidia-device-plugin-ctr") c["image"] = image;
  }
  return out;
}

Result<json> render_runtimeclass(const ManifestTexts& texts) {
  auto docs =
      yaml_documents(texts.runtimeclass, "manifests/runtimeclass-nvidia.yml");
  if (!docs) return docs.error();
  json rc = docs->at(0);
  label_managed(rc);
  return rc;
}

}  // namespace gpunode
