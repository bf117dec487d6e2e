// Which k3s role this host has, and what follows from it: the default
// --scope and the kubeconfig a run uses (README, "Roles on a cluster of many
// nodes"). One owner for the k3s paths that decide it.
#pragma once

#include <string>
#include <vector>

#include "gpunode/host.hpp"
#include "gpunode/options.hpp"

namespace gpunode {

// k3s's admin kubeconfig, written by servers only (k3s pkg/cli/server:
// --write-kubeconfig default).
inline constexpr const char* kAdminKubeconfig = "/etc/rancher/k3s/k3s.yaml";
// The kubelet's kubeconfig, on every node (servers run a kubelet too): k3s
// pkg/agent/config/config.go get(): kubeconfigKubelet = <data-dir>/agent/
// kubelet.kubeconfig, written by deps.KubeConfig with file paths to
// server-ca.crt, client-kubelet.crt and client-kubelet.key beside it; its
// server is the agent's local load balancer (https://127.0.0.1:6444). Its
// client certificate is the node's: system:node:<name>, group system:nodes.
inline constexpr const char* kKubeletKubeconfig =
    "/var/lib/rancher/k3s/agent/kubelet.kubeconfig";

// Where the k3s install script and distribution packages put the units.
const std::vector<std::string>& k3s_unit_dirs();

enum class HostRole { kServer, kAgent, kNone };
const char* host_role_name(HostRole r);  // "server", "agent", "none"

// k3s.service makes a server, else k3s-agent.service an agent (the k3s
// install script names the unit after INSTALL_K3S_EXEC's first word).
HostRole find_host_role(const FileSystem& fs);

// --scope, else: an agent (no admin kubeconfig named) does the node part,
// anything else both parts, as a single-node server always has.
Scope default_scope(const Options& opts, HostRole role);

// --kubeconfig when given; else the kubelet's for the node part alone (least
// privilege: no admin credentials on GPU agents); else k3s's admin one.
std::string kubeconfig_for(const Options& opts, Scope scope);

// The fix for a node part that finds the cluster part missing: the command
// an admin runs once, from a server.
std::string cluster_part_command();

}  // namespace gpunode
