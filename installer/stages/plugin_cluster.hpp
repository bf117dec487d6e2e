// What the cluster holds of the device plugin, beside the run's plan: read
// by the plugin stage.
#pragma once

#include <string>
#include <vector>

#include "gpunode/kube.hpp"
#include "gpunode/stage.hpp"
#include "plugin/device_plugin_plan.hpp"

namespace gpunode {

struct OtherPlugin {
  std::string ns;
  std::string name;
  std::string helm_release;    // when Helm installed it
  std::string helm_namespace;  // the release's namespace (Helm's record)
};

struct PluginState {
  const DevicePluginPlan* plan = nullptr;  // the run's (Context::plugin_plan)
  std::optional<kube::json> daemonset_live;
  std::optional<kube::json> configmap_live;
  bool daemonset_matches = false;
  bool configmap_matches = false;
  std::vector<OtherPlugin> others;  // NVIDIA device plugins that are not ours
};

Result<PluginState> read_plugin_state(Context& ctx);

// "name: capacity" of the nvidia.com/* resources in this node's capacity
// that the plugin as planned will not advertise: what another
// plugin, or our other variant, leaves behind.
Result<std::vector<std::string>> foreign_resources(Context& ctx,
                                                   const PluginState& s);

// GEO_MLOPS_* settings the platform needs when the resource is renamed.
void add_platform_settings(Check& c, const std::string& resource);

}  // namespace gpunode
