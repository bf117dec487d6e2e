// sim_node: runs one command on a simulated GPU node: the simulated k3s API
// (test/sim/k3s_sim.py) over a host tree, optionally a private containerd
// standing in for k3s's, with `k3s`, `nvidia-smi`, `systemctl` and KUBECONFIG
// set up in the command's environment. Everything stops when it ends.
//   sim_node --root DIR [--gpus N] [--containerd] -- COMMAND ARGS...
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "containerd_fixture.hpp"
#include "k3s_sim.hpp"

extern char** environ;

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
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  // posix_spawnp searches the parent's PATH; the simulated programs must win.
  setenv("PATH", path.c_str(), 1);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[i], nullptr, nullptr, argv + i, envp.data()) !=
      0) {
    std::fprintf(stderr, "sim_node: cannot run %s\n", argv[i]);
    return 127;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
