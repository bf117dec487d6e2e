// The device plugin settings the cluster runs now: one DaemonSet and one
// ConfigMap serve every GPU node, so these are the cluster's, whoever asks.
// An admin reads them from the DaemonSet and ConfigMap; a node's own
// identity cannot read DaemonSets (Node authorizer, RBAC NodeRules), so it
// reads them from the plugin pod bound to it and the ConfigMap that pod
// mounts, the one ConfigMap the Node authorizer lets it get
// (plugin/pkg/auth/authorizer/node/graph_populator.go: pod -> configmap).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "exposure/gpu_exposure.hpp"
#include "gpunode/kube.hpp"
#include "gpunode/sharing.hpp"

namespace gpunode {

struct LivePlugin {
  Sharing sharing;
  std::shared_ptr<const GpuExposure> exposure;  // the sharing's strategy
  // plugin_config_hash() of the live config: what a pod running it carries.
  std::string config_hash;
  std::string seen_in;   // "DaemonSet kube-system/...", "pod NAME on node N"
  std::string pod;       // the node's plugin pod (node reads), else empty
  std::string pod_hash;  // that pod's kConfigHashAnnotation
};

// The sharing a live config means: the strategy that recognizes the pod
// spec and its ConfigMap (time-slicing when it mounts the plugin ConfigMap),
// else the default variant.
Result<Sharing> sharing_of(const kube::json& pod_spec,
                           const std::optional<kube::json>& configmap);

// With admin credentials; nullopt when there is no DaemonSet.
Result<std::optional<LivePlugin>> read_cluster_plugin(
    kube::Client& kube, std::chrono::steady_clock::time_point deadline);

// With the node's identity; nullopt when no plugin pod is bound to `node`.
// The Node authorizer lets a kubelet read the ConfigMap only once its graph
// links it to a pod bound to the node, which lags the pod's creation (the
// real tier saw a 403 there right after the pod came): a refusal is asked
// again on `clock` for a few seconds before it counts.
Result<std::optional<LivePlugin>> read_node_plugin(
    kube::Client& kube, const std::string& node, Clock& clock,
    std::chrono::steady_clock::time_point deadline);

// "time-slicing, 4 slot(s) per GPU as nvidia.com/gpu": for messages.
std::string describe(const Sharing& s);

}  // namespace gpunode
