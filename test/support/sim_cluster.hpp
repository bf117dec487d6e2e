// A simulated multi-node k3s cluster for end-to-end tests: one simulated
// API server (test/sim/k3s_sim.py --nodes-json) and, per node, its own host
// tree (test/sim/host-tree.sh), its own real containerd, its own GPUs (or
// none), its kubelet's credentials where k3s writes them, and, on servers
// only, the admin kubeconfig.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "containerd_fixture.hpp"
#include "k3s_sim.hpp"
#include "test_support.hpp"

namespace gpunode::test {

struct SimNodeSpec {
  std::string name;
  bool server = false;
  int gpus = 0;          // 0: CPU-only
  std::string scenario;  // host-tree.sh scenario; empty: good-v3 / agent /
                         // cpu-server / cpu-agent
  bool embedded_registry_mirror = false;
};

struct SimClusterOptions {
  std::vector<SimNodeSpec> nodes;
  int plugin_start_ms = 50;
};

class SimCluster {
 public:
  explicit SimCluster(SimClusterOptions o);  // each node: own TempDir root,
                                             // own real containerd
  ~SimCluster();                             // stops everything it started
  SimCluster(const SimCluster&) = delete;
  SimCluster& operator=(const SimCluster&) = delete;

  struct Node {
    std::string name, root;
    bool server;
    int gpus;
    Containerd* containerd;
  };
  Node& node(const std::string& name);
  std::vector<std::string> node_names() const;
  // A real path (also at <server root>/etc/rancher/k3s/k3s.yaml).
  std::string admin_kubeconfig() const;
  // <root>/var/lib/rancher/k3s/agent/kubelet.kubeconfig, naming its files by
  // host paths as k3s does (gpunode --root reads them under the root).
  std::string kubelet_kubeconfig(const std::string& node) const;
  // The device plugin archive (build_image(ImageSpec{})).
  const std::string& image_archive() const;
  // gpunode ARGS --root <node root> with that node's env (PATH with its
  // containerd's k3s wrapper and test/sim/bin, GPUNODE_SIM_GPU_COUNT,
  // GPUNODE_SIM_ROOT), like SimGpuNode::gpunode.
  Run gpunode(const std::string& node, std::vector<std::string> args,
              const std::vector<std::string>& extra_env = {});
  Run kubectl(std::vector<std::string> args);  // admin
  // kubectl with the node's kubelet credentials (the same files as
  // kubelet_kubeconfig, by their real paths).
  Run kubectl_as(const std::string& node, std::vector<std::string> args);
  // {"writes", ..., "writes_by_user": {"system:node:a": N, ...}}
  nlohmann::json stats();
  void reset_stats();
  nlohmann::json object(const std::string& api_path);
  void set_node(const std::string& node, const nlohmann::json& knobs);
  std::string allocatable(const std::string& node,
                          const std::string& resource = "nvidia.com/gpu");
  std::string log_tail() const;
  K3sSim& sim() { return *sim_; }  // raw API requests (api, api_as)

  // The environment gpunode runs with on `node` (see gpunode()): for tools
  // that run it themselves (test/tools/sim_cluster.cpp, the demo).
  std::vector<std::string> env(const std::string& node);

 private:
  std::vector<std::string> env(const Node& n) const;

  TempDir dir_;
  std::string archive_;
  std::vector<std::unique_ptr<TempDir>> roots_;
  std::vector<std::unique_ptr<Containerd>> containerds_;
  std::vector<Node> nodes_;
  std::map<std::string, std::string> kubelet_kubeconfigs_;
  std::unique_ptr<K3sSim> sim_;
};

}  // namespace gpunode::test
