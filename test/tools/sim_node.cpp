// sim_node: runs one command on a simulated GPU node: the simulated k3s API
// (test/sim/k3s_sim.py) over a host tree, optionally a private containerd
// standing in for k3s's, with `k3s`, `nvidia-smi`, `systemctl` and KUBECONFIG
// set up in the command's environment. Everything stops when it ends.
//   sim_node --root DIR [--gpus N] [--containerd] -- COMMAND ARGS...
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "containerd_fixture.hpp"
#include "k3s_sim.hpp"

extern char** environ;  // NOLINT: the process environment, passed on

using namespace gpunode::test;

int main(int argc, char** argv) {
  SimOptions options;
  bool with_containerd = false;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--root" && i + 1 < argc) {
      options.root = argv[++i];
    } else if (a == "--gpus" && i + 1 < argc) {
      options.gpus = std::atoi(argv[++i]);
    } else if (a == "--containerd") {
      with_containerd = true;
    } else {
      std::fprintf(
          stderr,
          "usage: sim_node --root DIR [--gpus N] [--containerd] -- CMD...\n");
      return 2;
    }
  }
  if (options.root.empty() || i >= argc) {
    std::fprintf(
        stderr,
        "usage: sim_node --root DIR [--gpus N] [--containerd] -- CMD...\n");
    return 2;
  }
  std::string path =
      std::string(GPUNODE_TEST_SIM) + "/bin:" + std::getenv("PATH");
  if (with_containerd) {
    Containerd& ctd = Containerd::shared();
    options.containerd_socket = ctd.socket();
    path = ctd.bin_dir() + ":" + path;
  }
  K3sSim sim(options);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("PATH=", 0) != 0 && entry.rfind("KUBECONFIG=", 0) != 0)
      env.push_back(entry);
  }
  env.push_back("PATH=" + path);
  env.push_back("KUBECONFIG=" + sim.kubeconfig());
  env.push_back("GPUNODE_SIM_ROOT=" + options.root);
  env.push_back("GPUNODE_SIM_GPU_COUNT=" + std::to_string(options.gpus));
  env.push_back("GPUNODE_SIM_CONTROL_PORT=" +
                std::to_string(sim.control_port()));
  return spawn_and_wait(argv + i, std::move(env));
}
