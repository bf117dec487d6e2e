// sim_cluster: runs one command beside a simulated k3s cluster of several
// nodes (test/support/sim_cluster.hpp: one simulated API server; per node
// a host tree, a private containerd, GPUs or none, the kubelet's
// credentials, and on servers the admin kubeconfig). For each node it
// writes DIR/NODE.env (the environment gpunode runs with there, one
// VAR=value a line, the first line ROOT=<its host tree>) and the device
// plugin archive to DIR/k8s-device-plugin.tar; KUBECONFIG is the admin's.
// Everything stops when the command ends.
//   sim_cluster --dir DIR --node NAME:server|agent:GPUS[:SCENARIO]... -- CMD...
#include "sim_cluster.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

extern char** environ;  // NOLINT: the process environment, passed on

using namespace gpunode::test;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: sim_cluster --dir DIR --node "
               "NAME:server|agent:GPUS[:SCENARIO]... -- CMD...\n");
  return 2;
}

bool parse_node(const std::string& text, SimNodeSpec& out) {
  std::vector<std::string> parts;
  std::size_t from = 0;
  for (std::size_t at; (at = text.find(':', from)) != std::string::npos;
       from = at + 1)
    parts.push_back(text.substr(from, at - from));
  parts.push_back(text.substr(from));
  if (parts.size() < 3 || parts.size() > 4 || parts[0].empty()) return false;
  if (parts[1] != "server" && parts[1] != "agent") return false;
  out.name = parts[0];
  out.server = parts[1] == "server";
  out.gpus = std::atoi(parts[2].c_str());
  if (parts.size() == 4) out.scenario = parts[3];
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  SimClusterOptions options;
  std::string dir;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    SimNodeSpec spec;
    if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--node" && i + 1 < argc && parse_node(argv[++i], spec)) {
      options.nodes.push_back(spec);
    } else {
      return usage();
    }
  }
  if (dir.empty() || options.nodes.empty() || i >= argc) return usage();
  std::filesystem::create_directories(dir);
  SimCluster cluster(options);
  std::filesystem::copy_file(cluster.image_archive(),
                             dir + "/k8s-device-plugin.tar",
                             std::filesystem::copy_options::overwrite_existing);
  for (const std::string& name : cluster.node_names()) {
    std::ofstream env(dir + "/" + name + ".env");
    env << "ROOT=" << cluster.node(name).root << "\n";
    for (const std::string& line : cluster.env(name)) env << line << "\n";
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("KUBECONFIG=", 0) != 0) env.push_back(entry);
  }
  env.push_back("KUBECONFIG=" + cluster.admin_kubeconfig());
  return spawn_and_wait(argv + i, std::move(env));
}
