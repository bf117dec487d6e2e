// Benchmark: the time proof adds per node, for 1, 2 and 8 simulated GPUs
// (default variant, and time-slicing with 4 replicas), against one smoke
// Pod: the 1-GPU node's proof, which is exactly today's single Pod
// (created, watched to its end, log read, deleted), measured in the same
// run. `gpunode prove` on a node already installed, medians of
// GPUNODE_BENCH_ROUNDS (default 3) runs each.
#include <chrono>
#include <cstdio>
#include <map>

#include "bench_util.hpp"
#include "sim_gpu_node.hpp"

using namespace gpunode::test;
using gpunode::bench::median;

namespace {

double prove_seconds(SimGpuNode& node) {
  const auto t0 = std::chrono::steady_clock::now();
  Run r = node.gpunode({"prove", "--timeout", "300s"});
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (r.exit_code != 0) {
    std::fprintf(stderr, "prove failed:\n%s", r.err.c_str());
    std::exit(1);
  }
  return s;
}

}  // namespace

int main() {
  const char* rounds_env = std::getenv("GPUNODE_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 3;
  std::printf("proof time per node (gpunode prove, median of %d)\n", rounds);
  for (const std::string variant : {"default", "time-slicing"}) {
    std::map<int, double> took;
    for (int gpus : {1, 2, 8}) {
      SimGpuNode node("good-v3", gpus);
      std::vector<std::string> flags;
      if (variant == "time-slicing")
        flags = {"--variant", "time-slicing", "--replicas", "4"};
      Run installed = node.install(flags);
      if (installed.exit_code != 0) {
        std::fprintf(stderr, "install failed:\n%s", installed.err.c_str());
        return 1;
      }
      std::vector<double> runs;
      for (int i = 0; i < rounds; ++i) runs.push_back(prove_seconds(node));
      took[gpus] = median(runs);
    }
    for (int gpus : {1, 2, 8}) {
      std::printf(
          "  %-12s %d GPU(s): %6.2f s  (%.2fx one smoke Pod, %.2f s; %.2f s "
          "per GPU)\n",
          variant.c_str(), gpus, took[gpus], took[gpus] / took[1], took[1],
          took[gpus] / gpus);
    }
  }
  return 0;
}
