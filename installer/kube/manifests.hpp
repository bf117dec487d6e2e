// The platform's manifests (compiled in from manifests/*.yml), rendered for
// this run's flags, and the comparisons that decide whether applying them
// would change anything.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpunode/kube.hpp"
#include "gpunode/options.hpp"

namespace gpunode {

inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kConfigHashAnnotation = "gpunode.io/config-hash";
inline constexpr const char* kPluginNamespace = "kube-system";
inline constexpr const char* kPluginDaemonSet =
    "nvidia-device-plugin-daemonset";
inline constexpr const char* kPluginConfigMap = "nvidia-device-plugin-config";

struct RenderedPlugin {
  kube::json daemonset;
  std::optional<kube::json> configmap;  // time-slicing only
  std::string resource;     // nvidia.com/gpu or nvidia.com/gpu.shared
  int replicas = 1;         // slots per GPU
  std::string config_hash;  // also on the pod template
};

// YAML (one or more documents) to JSON, keeping YAML's types: quoted
// scalars stay strings ("false" in an env value), plain ones become
// booleans, integers or null where they read as such.
Result<std::vector<kube::json>> yaml_documents(const std::string& yaml,
                                               const std::string& source);

// The three manifest texts a run installs: compiled in, or the verified
// bundle's (stages/bundle_facts.hpp: manifest_texts()).
struct ManifestTexts {
  std::string runtimeclass;
  std::string device_plugin;
  std::string time_slicing;
  std::string origin;  // for messages: "built-in" or the bundle's path

  static ManifestTexts built_in();
};

Result<kube::json> render_runtimeclass(
    const ManifestTexts& texts = ManifestTexts::built_in());
Result<RenderedPlugin> render_device_plugin(
    const Options& opts, const std::string& plugin_image,
    const ManifestTexts& texts = ManifestTexts::built_in());

// The API path of an object: /api/v1/namespaces/NS/configmaps/NAME, ...
std::string object_path(const kube::json& object);

// True when every field `desired` sets has the same value in `live`: what
// the server added (defaults, status, metadata) does not count, so a live
// object that already holds everything we would apply needs no write.
bool holds_all_of(const kube::json& live, const kube::json& desired);

// Where they first differ, as a field path ("spec.template.spec.
// runtimeClassName"), for messages; empty when holds_all_of() is true.
std::string first_difference(const kube::json& live, const kube::json& desired,
                             const std::string& at = "");

}  // namespace gpunode
