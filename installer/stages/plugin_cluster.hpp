// What the cluster holds of the device plugin, shared by the plugin,
// allocatable and uninstall steps.
#pragma once

#include <string>
#include <vector>

#include "gpunode/kube.hpp"
#include "gpunode/stage.hpp"
#include "kube/manifests.hpp"

namespace gpunode {

struct OtherPlugin {
  std::string ns;
  std::string name;
  std::string helm_release;    // when Helm installed it
  std::string helm_namespace;  // the release's namespace (Helm's record)
};

struct PluginState {
  RenderedPlugin rendered;
  std::optional<kube::json> daemonset_live;
  std::optional<kube::json> configmap_live;
  bool daemonset_matches = false;
  bool configmap_matches = false;
  std::vector<OtherPlugin> others;  // NVIDIA device plugins that are not ours
};

std::string daemonset_path();
std::string configmap_path();

Result<PluginState> read_plugin_state(Context& ctx);

// "name: capacity" of the nvidia.com/* resources in this node's capacity
// that the plugin as rendered in `s` will not advertise: what another
// plugin, or our other variant, leaves behind.
Result<std::vector<std::string>> foreign_resources(Context& ctx,
                                                   const PluginState& s);

// GEO_MLOPS_* settings the platform needs when the resource is renamed.
void add_platform_settings(Check& c, const std::string& resource);

}  // namespace gpunode
