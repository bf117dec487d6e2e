#include "run/cluster_facts.hpp"

#include <yaml-cpp/yaml.h>

#include "run/host_role.hpp"

namespace gpunode {
namespace {

// The kubelet's kubeconfig names files k3s itself keeps beside it; a fix
// that points there (a missing, mismatched or expired client key) must not
// send an agent's operator to k3s.yaml, which agents do not have.
Error kubelet_fix(Error e, const std::string& path) {
  if (path != kKubeletKubeconfig) return e;
  if (!e.fix.empty() && e.fix.find("k3s.yaml") == std::string::npos) return e;
  e.fix =
      "the kubelet's client-kubelet.crt, client-kubelet.key and "
      "server-ca.crt in /var/lib/rancher/k3s/agent/ are k3s's own: restart "
      "it to rewrite them (sudo systemctl restart k3s-agent; k3s on a "
      "server), or pass --kubeconfig";
  return e;
}

}  // namespace

Result<std::unique_ptr<kube::Client>> connect_cluster(
    Host& host, const std::string& path, Scope scope,
    std::vector<std::pair<std::string, std::string>>& warnings) {
  auto config = kube::load_kubeconfig(host.fs(), path);
  if (!config) {
    Error e = config.error();
    const bool missing = !host.fs().stat(path);
    if (missing && path == kKubeletKubeconfig) {
      e.fix =
          "k3s writes it when this node joins the cluster (sudo systemctl "
          "status k3s-agent); or pass --kubeconfig";
    } else if (missing && path == kAdminKubeconfig) {
      e.fix =
          std::string(
              "k3s writes it when a server starts (sudo systemctl "
              "status k3s). ") +
          (has_node_part(scope)
               // The same for every command (regression, independent try
               // of issue 26: uninstall was told "gpunode install").
               ? "On an agent node, run the node part with the kubelet's own "
                 "identity: rerun with --scope node (the default there); the "
                 "cluster part runs on a server, with --scope cluster"
               : "The cluster part needs an admin kubeconfig: run it on a "
                 "server, or pass --kubeconfig");
    } else if (missing) {
      // A path the operator named with --kubeconfig (no site setting
      // names one): most likely a typo. Never "copy the admin's to this
      // node": a GPU agent needs no admin credentials (README).
      e.fix =
          "check the path given as the kubeconfig (--kubeconfig); on a GPU "
          "agent leave it out: the node part uses the kubelet's own "
          "identity";
    }
    return kubelet_fix(e, path);
  }
  for (const std::string& w : config->warnings)
    warnings.emplace_back("kubeconfig", w);
  auto client = kube::Client::connect(*config, host.clock());
  if (!client) return kubelet_fix(client.error(), path);
  return client;
}

Check cluster_blocked(Context& ctx, const Error& e,
                      const std::string& own_code) {
  // A bad node name is layer "cluster" too, but the operator's input.
  const bool connection = e.layer == "kubeconfig" ||
                          (e.layer == "cluster" && e.exit != ExitCode::kUsage);
  if (e.layer == "kubeconfig" ||
      (connection && (e.status == 0 || e.status >= 500)))
    ctx.mark_cluster_down(e);
  return blocked(connection ? kClusterConnectionCode : own_code, e.message,
                 e.fix, e.exit);
}

Result<std::string> find_node_name(Host& host, const Options& opts) {
  std::string name = opts.node;
  const std::string config_path = "/etc/rancher/k3s/config.yaml";
  if (name.empty() && host.fs().stat(config_path)) {
    auto text = host.fs().read_file(config_path, 1024 * 1024);
    if (!text) return text.error();
    try {
      YAML::Node config = YAML::Load(*text);
      if (config.IsMap() && config["node-name"] &&
          config["node-name"].IsScalar()) {
        name = config["node-name"].as<std::string>();
      }
    } catch (const YAML::Exception& e) {
      return Error{
          ExitCode::kUsage, "cluster",
          config_path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg,
          "fix the YAML in " + config_path + " (k3s reads it too)"};
    }
  }
  std::string source = opts.node.empty() ? config_path : "--node";
  if (name.empty()) {
    name = host.hostname();
    source = "the host name";
  }
  // k3s lower-cases the host name for the node name.
  for (auto& c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // The name goes into API paths (/api/v1/nodes/NAME): "../x" from a
  // config.yaml would address another resource.
  if (!valid_node_name(name)) {
    return Error{ExitCode::kUsage, "cluster",
                 source + ": '" + name +
                     "' is not a valid Kubernetes node name (lower-case "
                     "letters, digits, '-' and '.', at most 253 characters)",
                 "set node-name in " + config_path +
                     " to the name k3s registered this node as, or pass "
                     "--node NAME"};
  }
  return name;
}

Error node_not_in_cluster(Context& ctx, kube::Client& kube,
                          const std::string& node,
                          std::chrono::steady_clock::time_point deadline) {
  constexpr std::size_t kMaxNamed = 8;
  std::string names;
  std::size_t count = 0;
  if (auto list = kube.list("/api/v1/nodes", deadline)) {
    for (const auto& item : list->value("items", kube::json::array())) {
      const std::string name =
          item.value("metadata", kube::json::object()).value("name", "");
      if (name.empty()) continue;
      if (++count <= kMaxNamed) names += (names.empty() ? "" : ", ") + name;
    }
  }
  const std::string known =
      count == 0 ? ""
      : count <= kMaxNamed
          ? " (its nodes: " + names + ")"
          : " (it has " + std::to_string(count) + " nodes: " + names + ", ...)";
  const std::string source =
      ctx.opts.node.empty()
          ? " (from node-name in /etc/rancher/k3s/config.yaml, else the host "
            "name)"
          : " (--node)";
  return Error{ExitCode::kUsage, "cluster",
               "node " + node + source + " is not in the cluster" + known,
               "pass --node with the name `kubectl get nodes` shows for this "
               "host (k3s registers node-name from "
               "/etc/rancher/k3s/config.yaml, else the host name)"};
}

}  // namespace gpunode
