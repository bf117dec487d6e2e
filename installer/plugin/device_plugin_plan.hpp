// The device plugin as this run wants it: built once per run from the
// sharing settings and the manifest texts (Context::plugin_plan()), and read
// by every step that needs it (the plugin, allocatable and smoke stages,
// uninstall, plan). One owner for the objects to apply, the resource each
// GPU advertises and the config digest.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "exposure/gpu_exposure.hpp"
#include "gpunode/kube.hpp"
#include "gpunode/sharing.hpp"
#include "plugin/manifest_texts.hpp"

namespace gpunode {

inline constexpr const char* kConfigHashAnnotation = "gpunode.io/config-hash";
inline constexpr const char* kPluginNamespace = "kube-system";
inline constexpr const char* kPluginDaemonSet =
    "nvidia-device-plugin-daemonset";
inline constexpr const char* kPluginConfigMap = "nvidia-device-plugin-config";
// The label the platform's DaemonSet puts on its pods.
inline constexpr const char* kPluginPodSelector =
    "name=nvidia-device-plugin-ds";

struct DevicePluginPlan {
  Sharing sharing;
  // The strategy: resource, slots, what the smoke Pod asks for.
  std::shared_ptr<const GpuExposure> exposure;
  std::string image;                    // the plugin container's image
  kube::json daemonset;                 // as it is applied
  std::optional<kube::json> configmap;  // time-slicing only
  std::string resource;          // nvidia.com/gpu or nvidia.com/gpu.shared
  int replicas = 1;              // slots per GPU
  std::string config_hash;       // also on the pod template
  std::string manifests_origin;  // "built-in" or the bundle's manifests/

  // GPUs x slots: what a node with `gpus` GPUs advertises.
  long long slots_for(int gpus) const { return exposure->slots_for(gpus); }
};

// What the pod template's kConfigHashAnnotation holds for a config: the
// ConfigMap's data as applied, or the default variant's fixed text. A node
// recomputes it from the live ConfigMap to tell a current pod from an old one.
std::string plugin_config_hash(const kube::json* configmap);

// The plugin pods on `node` (label and field selector: what the Node
// authorizer lets the node's own identity list); on every node when `node`
// is empty.
std::string plugin_pods_path(const std::string& node);

// Whether a pod spec (the DaemonSet's template, or a pod of it) mounts the
// plugin ConfigMap.
bool mounts_plugin_config(const kube::json& pod_spec);
// The error for a live plugin ConfigMap that cannot be read as a config.
Error live_config_unreadable(const std::string& why);

std::string runtimeclass_path();
std::string daemonset_path();
std::string configmap_path();
// "DaemonSet kube-system/nvidia-device-plugin-daemonset", "ConfigMap ...":
// how messages and plan's totals name them.
std::string daemonset_name();
std::string configmap_name();

// The platform's device plugin manifest for `sharing` (its strategy's
// objects), with `image` as the plugin container's image. Errors
// (ExitCode::kUsage, layer "plugin") name the manifest that is malformed.
Result<DevicePluginPlan> plan_device_plugin(
    const Sharing& sharing, const std::string& image,
    const ManifestTexts& texts = ManifestTexts::built_in());

Result<kube::json> render_runtimeclass(
    const ManifestTexts& texts = ManifestTexts::built_in());

}  // namespace gpunode
