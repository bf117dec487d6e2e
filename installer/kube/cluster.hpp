// The cluster as the stages see it: one API client per run, made on first
// use from --kubeconfig, and this host's node name.
#pragma once

#include <string>

#include "gpunode/kube.hpp"
#include "gpunode/stage.hpp"

namespace gpunode {

Result<kube::Client*> cluster(Context& ctx);

// A check blocked by `e`: kClusterConnectionCode when `e` is the
// kubeconfig's or the API server's (layers "kubeconfig", "cluster"), else
// `own_code` (e.g. a bad manifest in the bundle is the stage's own). A
// cluster that cannot be reached at all (no usable kubeconfig, no answer,
// 5xx until given up) is remembered: cluster() then returns that error at
// once, so the stages after it do not wait out the --timeout again.
Check cluster_blocked(Context& ctx, const Error& e,
                      const std::string& own_code);

// --node, else node-name in /etc/rancher/k3s/config.yaml (what k3s
// registers the node as), else the host name.
Result<std::string> node_name(Context& ctx);

// The error for a node name the API server does not know (GET answered
// 404): invalid input, naming the nodes there are when they are few.
Error node_not_in_cluster(Context& ctx, kube::Client& kube,
                          const std::string& node,
                          std::chrono::steady_clock::time_point deadline);

}  // namespace gpunode
