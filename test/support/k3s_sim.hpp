// The simulated k3s node (test/sim/k3s_sim.py) as a test fixture: a real
// HTTPS kube-apiserver stand-in with client-certificate auth, discovery,
// server-side apply, watch and Status errors, plus a kubelet/device-plugin
// model that advertises GPUs x replicas only when the real preconditions
// hold. One instance per test (it starts in well under a second). With
// SimOptions.nodes it is a cluster of several nodes behind the one API
// server (sim_cluster.hpp wraps that with a host tree and a containerd per
// node).
#pragma once

#include <sys/types.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace gpunode::test {

// One node of a multi-node simulated cluster (k3s_sim.py --nodes-json).
struct SimNodeConfig {
  std::string name;
  std::string root;               // its host tree
  std::string containerd_socket;  // its own containerd
  int gpus = 0;
  bool server = false;  // control-plane labels and an admin k3s.yaml
  int plugin_start_ms = 100;
  bool embedded_registry_mirror = false;
};

struct SimOptions {
  std::string root;  // the host tree (test/sim/host-tree.sh); required
                     // unless `nodes` is given
  std::string containerd_socket;  // where image presence is read; empty = every
                                  // image present
  int gpus = 1;
  std::string node = "gpu-node-1";
  // How long the simulated device plugin takes from pod start to advertising.
  int plugin_start_ms = 100;
  // Pre-create the RuntimeClasses of k3s's manifests/runtimes.yaml (nvidia,
  // nvidia-experimental, crun, wasm ones), as k3s >= v1.29 does unless
  // started with --disable runtimes. Off by default so tests see the layer
  // missing unless they ask for it.
  bool k3s_runtime_classes = false;
  // Several nodes behind the one API server; when set, root, containerd,
  // gpus, node and plugin_start_ms above are unused, and every server
  // node's root gets the admin k3s.yaml.
  std::vector<SimNodeConfig> nodes;
};

// Which client certificate a raw API request presents.
enum class ClientCert { kAdmin, kNone, kExpired };

// A raw answer of the simulated API server (chunked bodies decoded).
struct ApiResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

class K3sSim {
 public:
  explicit K3sSim(SimOptions options);
  ~K3sSim();  // stops the simulator
  K3sSim(const K3sSim&) = delete;
  K3sSim& operator=(const K3sSim&) = delete;

  // Written into <root>/etc/rancher/k3s/k3s.yaml (0600) in k3s's shape, too.
  const std::string& kubeconfig() const;
  int port() const;
  int control_port() const;        // the plain-HTTP control channel
  const std::string& dir() const;  // certificates, alternative kubeconfigs, log
  pid_t pid() const;
  std::string log_tail() const;  // the end of <dir>/sim.log

  // Control channel (plain HTTP on loopback, separate port).
  // {"writes": N, "requests": N, "by_verb": {...}, "writes_by_user":
  // {"system:admin": N, "system:node:NAME": N}, ...}: write requests as
  // sent, refused ones included.
  nlohmann::json stats();
  void reset_stats();
  void faults(const nlohmann::json& knobs);  // see test/sim/k3ssim/control.py
  // {"gpus": N, "healthy": N} of the first node, or {"name": NODE, ...}.
  void set_node(const nlohmann::json& node_knobs);
  nlohmann::json object(
      const std::string& api_path);  // current object, or null
  // A pod's log as the kubelet holds it ("" when it has none yet).
  std::string pod_log(const std::string& ns, const std::string& pod);

  // One HTTPS request to the API (TLS verified against the server CA), for
  // tests that check exact Status bodies or TLS/auth behaviour.
  ApiResponse api(const std::string& method, const std::string& path,
                  const std::string& body = "",
                  const std::string& content_type = "application/json",
                  ClientCert cert = ClientCert::kAdmin);
  // The kubelet's credentials of `node` as k3s writes them into the agent
  // data dir under `root` (k3s pkg/agent/config/config.go: kubeconfigKubelet
  // = <data-dir>/agent/kubelet.kubeconfig, written by deps.KubeConfig with
  // file paths to server-ca.crt, client-kubelet.crt and client-kubelet.key;
  // the key 0600): a client certificate for CN=system:node:NODE,
  // O=system:nodes from the client CA. The kubeconfig names the files by
  // their host paths (/var/lib/rancher/k3s/agent/...), as k3s does, so
  // gpunode --root finds them. Returns the kubeconfig's real path.
  std::string write_kubelet_credentials(const std::string& node,
                                        const std::string& root);
  // The same credentials with the files' real paths, for kubectl (which
  // knows no --root).
  std::string kubelet_kubeconfig_for_kubectl(const std::string& node) const;
  // One HTTPS request as `node`'s kubelet (after write_kubelet_credentials).
  ApiResponse api_as(const std::string& node, const std::string& method,
                     const std::string& path, const std::string& body = "",
                     const std::string& content_type = "application/json");
  // Alternative kubeconfigs for the failure tests.
  std::string kubeconfig_with_wrong_ca() const;
  std::string kubeconfig_with_expired_cert() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpunode::test
