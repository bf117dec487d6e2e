#include "sim_cluster.hpp"

#include <cstdlib>
#include <stdexcept>

#include "oci_builder.hpp"

namespace gpunode::test {
namespace {

std::string default_scenario(const SimNodeSpec& spec) {
  if (spec.server) return spec.gpus > 0 ? "good-v3" : "cpu-server";
  return spec.gpus > 0 ? "agent" : "cpu-agent";
}

// host-tree.sh DIR SCENARIO NODE_NAME: the node's k3s config names it.
void make_node_tree(const std::string& dir, const std::string& scenario,
                    const std::string& name) {
  Run r = run_with_sim({"bash", std::string(GPUNODE_TEST_SIM) + "/host-tree.sh",
                        dir, scenario, name});
  if (r.exit_code != 0)
    throw std::runtime_error("host-tree.sh " + scenario + " failed: " + r.err);
}

}  // namespace

SimCluster::SimCluster(SimClusterOptions o) {
  if (o.nodes.empty())
    throw std::invalid_argument("SimCluster: at least one node is needed");
  archive_ = dir_.path() + "/k8s-device-plugin.tar";
  build_image(archive_, ImageSpec{});
  SimOptions sim;
  for (const SimNodeSpec& spec : o.nodes) {
    roots_.push_back(std::make_unique<TempDir>());
    containerds_.push_back(Containerd::start_private());
    const std::string root = roots_.back()->path() + "/node";
    make_node_tree(
        root, spec.scenario.empty() ? default_scenario(spec) : spec.scenario,
        spec.name);
    if (spec.embedded_registry_mirror) write_mirror_files(root, !spec.server);
    nodes_.push_back(Node{spec.name, root, spec.server, spec.gpus,
                          containerds_.back().get()});
    SimNodeConfig config;
    config.name = spec.name;
    config.root = root;
    config.containerd_socket = containerds_.back()->socket();
    config.gpus = spec.gpus;
    config.server = spec.server;
    config.plugin_start_ms = o.plugin_start_ms;
    config.embedded_registry_mirror = spec.embedded_registry_mirror;
    sim.nodes.push_back(config);
  }
  sim_ = std::make_unique<K3sSim>(sim);
  // Every node runs a kubelet, servers too (a k3s server is also an agent).
  for (const Node& n : nodes_)
    kubelet_kubeconfigs_[n.name] =
        sim_->write_kubelet_credentials(n.name, n.root);
}

// The simulator first (it reads the containerds), then the containerds and
// the trees, in reverse order of their making.
SimCluster::~SimCluster() {
  sim_.reset();
  containerds_.clear();
  roots_.clear();
}

SimCluster::Node& SimCluster::node(const std::string& name) {
  for (Node& n : nodes_)
    if (n.name == name) return n;
  throw std::invalid_argument("SimCluster: no node " + name);
}

std::vector<std::string> SimCluster::node_names() const {
  std::vector<std::string> out;
  for (const Node& n : nodes_) out.push_back(n.name);
  return out;
}

std::string SimCluster::admin_kubeconfig() const { return sim_->kubeconfig(); }

std::string SimCluster::kubelet_kubeconfig(const std::string& node) const {
  const auto it = kubelet_kubeconfigs_.find(node);
  if (it == kubelet_kubeconfigs_.end())
    throw std::invalid_argument("SimCluster: no node " + node);
  return it->second;
}

const std::string& SimCluster::image_archive() const { return archive_; }

std::vector<std::string> SimCluster::env(const Node& n) const {
  const char* path = std::getenv("PATH");
  return {"PATH=" + n.containerd->bin_dir() + ":" +
              std::string(GPUNODE_TEST_SIM) +
              "/bin:" + (path ? path : "/usr/bin:/bin"),
          "GPUNODE_SIM_GPU_COUNT=" + std::to_string(n.gpus),
          "GPUNODE_SIM_ROOT=" + n.root};
}

std::vector<std::string> SimCluster::env(const std::string& node) {
  return env(this->node(node));
}

Run SimCluster::gpunode(const std::string& node, std::vector<std::string> args,
                        const std::vector<std::string>& extra_env) {
  Node& n = this->node(node);
  args.insert(args.begin() + (args.empty() ? 0 : 1), {"--root", n.root});
  std::vector<std::string> e = env(n);
  e.insert(e.end(), extra_env.begin(), extra_env.end());
  return run_gpunode(args, e);
}

Run SimCluster::kubectl(std::vector<std::string> args) {
  args.insert(args.begin(), {"kubectl", "--kubeconfig", admin_kubeconfig()});
  return run_with_sim(args, env(nodes_.front()));
}

Run SimCluster::kubectl_as(const std::string& node,
                           std::vector<std::string> args) {
  args.insert(args.begin(), {"kubectl", "--kubeconfig",
                             sim_->kubelet_kubeconfig_for_kubectl(node)});
  return run_with_sim(args, env(this->node(node)));
}

nlohmann::json SimCluster::stats() { return sim_->stats(); }

void SimCluster::reset_stats() { sim_->reset_stats(); }

nlohmann::json SimCluster::object(const std::string& api_path) {
  return sim_->object(api_path);
}

void SimCluster::set_node(const std::string& node,
                          const nlohmann::json& knobs) {
  nlohmann::json body = knobs;
  body["name"] = node;
  sim_->set_node(body);
}

std::string SimCluster::allocatable(const std::string& node,
                                    const std::string& resource) {
  nlohmann::json n = sim_->object("/api/v1/nodes/" + node);
  if (n.is_null()) return "";
  const auto& a = n["status"]["allocatable"];
  return a.contains(resource) ? a[resource].get<std::string>() : "";
}

std::string SimCluster::log_tail() const { return sim_->log_tail(); }

}  // namespace gpunode::test
