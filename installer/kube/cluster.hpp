// The cluster as the stages see it: one API client per run, made on first
// use from --kubeconfig, and this host's node name.
#pragma once

#include <string>

#include "gpunode/kube.hpp"
#include "gpunode/stage.hpp"

namespace gpunode {

Result<kube::Client*> cluster(Context& ctx);

// --node, else node-name in /etc/rancher/k3s/config.yaml (what k3s
// registers the node as), else the host name.
Result<std::string> node_name(Context& ctx);

}  // namespace gpunode
