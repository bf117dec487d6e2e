// The cluster as the stages see it: how Context::cluster() and
// Context::node() find their facts, and how a check reports a cluster it
// could not ask.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpunode/kube.hpp"
#include "gpunode/stage.hpp"

namespace gpunode {

// Loads the kubeconfig at `path` (Context::kubeconfig()) and connects. The
// kubeconfig's warnings (credentials readable by others) go to `warnings`
// as (layer, text). A missing one is explained for the scope: the kubelet's
// exists once k3s-agent has joined; the admin one only on servers.
Result<std::unique_ptr<kube::Client>> connect_cluster(
    Host& host, const std::string& path, Scope scope,
    std::vector<std::pair<std::string, std::string>>& warnings);

// --node, else node-name in /etc/rancher/k3s/config.yaml (what k3s
// registers the node as), else the host name.
Result<std::string> find_node_name(Host& host, const Options& opts);

// A check blocked by `e`: kClusterConnectionCode when `e` is the
// kubeconfig's or the API server's (layers "kubeconfig", "cluster"), else
// `own_code` (e.g. a bad manifest in the bundle is the stage's own). A
// cluster that cannot be reached at all (no usable kubeconfig, no answer,
// 5xx until given up) is remembered (Context::mark_cluster_down), so the
// stages after it do not wait out the --timeout again.
Check cluster_blocked(Context& ctx, const Error& e,
                      const std::string& own_code);

// The error for a node name the API server does not know (GET answered
// 404): invalid input, naming the nodes there are when they are few.
Error node_not_in_cluster(Context& ctx, kube::Client& kube,
                          const std::string& node,
                          std::chrono::steady_clock::time_point deadline);

}  // namespace gpunode
