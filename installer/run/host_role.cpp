#include "run/host_role.hpp"

namespace gpunode {

const std::vector<std::string>& k3s_unit_dirs() {
  static const std::vector<std::string> dirs = {
      "/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"};
  return dirs;
}

const char* host_role_name(HostRole r) {
  switch (r) {
    case HostRole::kServer:
      return "server";
    case HostRole::kAgent:
      return "agent";
    case HostRole::kNone:
      return "none";
  }
  return "none";
}

HostRole find_host_role(const FileSystem& fs) {
  for (const char* unit : {"k3s.service", "k3s-agent.service"}) {
    for (const auto& dir : k3s_unit_dirs()) {
      if (fs.stat(dir + "/" + unit))
        return unit[3] == '.' ? HostRole::kServer : HostRole::kAgent;
    }
  }
  return HostRole::kNone;
}

Scope default_scope(const Options& opts, HostRole role) {
  if (opts.scope) return *opts.scope;
  if (role == HostRole::kAgent && !opts.kubeconfig_given) return Scope::kNode;
  return Scope::kBoth;
}

std::string kubeconfig_for(const Options& opts, Scope scope) {
  if (opts.kubeconfig_given) return opts.kubeconfig;
  if (scope == Scope::kNode) return kKubeletKubeconfig;
  return opts.kubeconfig;
}

std::string cluster_part_command() {
  return "on a server (or any machine with an admin kubeconfig), once for the "
         "cluster: sudo gpunode install --scope cluster (with the --variant "
         "and --replicas the cluster should run); then rerun gpunode here";
}

}  // namespace gpunode
