#include "plugin/device_plugin_plan.hpp"

#include <yaml-cpp/yaml.h>

#include "gpunode/digest.hpp"
#include "kube/manifests.hpp"
#include "plugin/gpu_labels.hpp"

namespace gpunode {
namespace {

using kube::json;

// The device plugin's own config file: renameByDefault belongs under
// sharing.timeSlicing (under `flags` the plugin ignores it; device-plugin
// #1433); replicas are within sharing.hpp's bounds already.
Result<std::string> render_plugin_config(const std::string& text, int replicas,
                                         bool rename) {
  try {
    YAML::Node config = YAML::Load(text);
    YAML::Node slicing = config["sharing"]["timeSlicing"];
    slicing["renameByDefault"] = rename;
    bool found = false;
    for (auto resource : slicing["resources"]) {
      if (resource["name"].as<std::string>() == kGpuResource) {
        resource["replicas"] = replicas;
        found = true;
      }
    }
    if (!found) {
      return Error{
          ExitCode::kUsage,
          "plugin",
          "the time-slicing manifest's config has no resource nvidia.com/gpu",
          {}};
    }
    YAML::Emitter out;
    out << config;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception& e) {
    return Error{
        ExitCode::kUsage,
        "plugin",
        "the time-slicing manifest's config.yaml is not valid YAML: " + e.msg,
        {}};
  }
}

}  // namespace

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
  const bool slicing = sharing.time_slicing();
  auto docs =
      slicing ? yaml_documents(texts.time_slicing,
                               "manifests/nvidia-device-plugin-timeSlicing.yml")
              : yaml_documents(texts.device_plugin,
                               "manifests/nvidia-device-plugin.yml");
  if (!docs) return docs.error();
  DevicePluginPlan out;
  out.sharing = sharing;
  out.image = image;
  out.manifests_origin = texts.origin;
  out.replicas = slicing ? sharing.replicas : 1;
  out.resource = sharing.resource();
  for (auto& doc : *docs) {
    const std::string kind = doc.value("kind", "");
    if (kind == "ConfigMap") {
      auto config =
          render_plugin_config(doc["data"]["config.yaml"].get<std::string>(),
                               sharing.replicas, sharing.rename);
      if (!config) return config.error();
      doc["data"]["config.yaml"] = *config;
      label_managed(doc);
      out.configmap = doc;
    } else if (kind == "DaemonSet") {
      out.daemonset = doc;
    }
  }
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
