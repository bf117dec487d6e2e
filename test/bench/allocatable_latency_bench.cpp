// Benchmark: how soon each waiter notices that the node advertises its GPUs.
// The simulated node flips allocatable (its GPU turns healthy) while two
// waiters wait for it, together, on the same flip: gpunode's allocatable
// stage (a watch) and `kubectl wait --for=jsonpath=...` (a watch too: the
// peer). Also times a no-op rerun of gpunode against `kubectl apply
// --server-side` of the same manifests, and counts what that rerun writes:
// the API's writes (the simulator's count of non-GET requests) and the host
// tree's (entries whose size or times changed; the image stage is skipped,
// so no containerd runs here). Prints medians and ratios.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "bench_util.hpp"
#include "k3s_sim.hpp"
#include "test_support.hpp"
#include "tree_writes.hpp"

using namespace gpunode::test;
using gpunode::bench::median;
using Clock = std::chrono::steady_clock;

namespace {

double now_unix() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main() {
  const char* rounds_env = std::getenv("GPUNODE_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 5;
  TempDir dir;
  const std::string root = dir.path() + "/node";
  make_host_tree(root, "good-v3");
  SimOptions options;
  options.root = root;  // no containerd socket: every image counts as present
  options.plugin_start_ms = 50;
  K3sSim sim(options);
  const char* path = std::getenv("PATH");
  const std::vector<std::string> env{
      "PATH=" + std::string(GPUNODE_TEST_SIM) +
          "/bin:" + (path ? path : "/usr/bin:/bin"),
      "GPUNODE_SIM_ROOT=" + root};
  const std::vector<std::string> install{GPUNODE_SHIPPED_BINARY,
                                         "install",
                                         "--root",
                                         root,
                                         "--skip",
                                         "image",
                                         "--timeout",
                                         "60s"};
  Run first = run_with_sim(install, env);
  if (first.exit_code != 0) {
    std::fprintf(stderr, "install failed:\n%s", first.err.c_str());
    return 1;
  }

  std::vector<double> ours, kubectl_wait;
  for (int i = 0; i < rounds; ++i) {
    sim.set_node({{"healthy", 0}});
    // Wait until the node shows 0 before the waiters start.
    for (int t = 0; t < 200; ++t) {
      auto node = sim.object("/api/v1/nodes/gpu-node-1");
      if (node["status"]["allocatable"].value("nvidia.com/gpu", "") == "0")
        break;
      usleep(10000);
    }
    std::vector<double> exits(2, 0.0);
    std::vector<std::thread> waiters;
    waiters.emplace_back([&] {
      Run r = run_with_sim({GPUNODE_SHIPPED_BINARY, "install", "--root", root,
                            "--only", "allocatable", "--timeout", "60s"},
                           env);
      exits[0] = r.exit_code == 0 ? now_unix() : -1;
    });
    waiters.emplace_back([&] {
      Run r = run_with_sim(
          {"kubectl", "--kubeconfig", sim.kubeconfig(), "wait",
           "--for=jsonpath={.status.allocatable.nvidia\\.com/gpu}=1",
           "node/gpu-node-1", "--timeout=60s"},
          env);
      exits[1] = r.exit_code == 0 ? now_unix() : -1;
    });
    std::this_thread::sleep_for(
        std::chrono::milliseconds(1500));  // all three are waiting
    sim.set_node({{"healthy", 1}});
    for (auto& w : waiters) w.join();
    const double flipped = sim.stats().value("allocatable_changed_at", 0.0);
    if (exits[0] < 0 || exits[1] < 0 || flipped <= 0) {
      std::fprintf(stderr, "a waiter failed in round %d\n", i);
      return 1;
    }
    ours.push_back(exits[0] - flipped);
    kubectl_wait.push_back(exits[1] - flipped);
  }

  std::vector<double> noop, peer;
  std::size_t api_writes = 0, host_writes = 0;
  std::vector<std::string> written;
  const std::string manifests =
      std::string(GPUNODE_TEST_SIM) + "/../../manifests";
  for (int i = 0; i < rounds; ++i) {
    sim.reset_stats();
    const TimesSnapshot before = snapshot_times(root);
    auto t0 = Clock::now();
    if (run_with_sim(install, env).exit_code != 0) return 1;
    noop.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    api_writes = std::max<std::size_t>(api_writes, sim.stats()["writes"]);
    const auto changed = written_between(before, snapshot_times(root));
    if (changed.size() >= host_writes) {
      host_writes = changed.size();
      written = changed;
    }
    t0 = Clock::now();
    Run applied = run_with_sim(
        {"kubectl", "--kubeconfig", sim.kubeconfig(), "apply", "--server-side",
         "-f", manifests + "/runtimeclass-nvidia.yml", "-f",
         manifests + "/nvidia-device-plugin.yml"},
        env);
    if (applied.exit_code != 0) {
      std::fprintf(stderr, "kubectl apply failed: %s\n", applied.err.c_str());
      return 1;
    }
    peer.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const double o = median(ours), k = median(kubectl_wait);
  std::printf("allocatable detection after the flip, %d rounds, medians:\n",
              rounds);
  std::printf("  ours  gpunode install --only allocatable (watch)  %7.3f s\n",
              o);
  std::printf(
      "  peer  kubectl wait --for=jsonpath (watch)         %7.3f s  "
      "(gpunode/peer %.2f)\n",
      k, o / k);
  const double n = median(noop), a = median(peer);
  std::string paths;
  for (const std::string& w : written) paths += (paths.empty() ? "" : ", ") + w;
  std::printf("no-op rerun (everything in place), medians:\n");
  std::printf(
      "  ours  gpunode install (all stages but image)      %7.3f s  (most "
      "in a round: %zu API writes, %zu host entries written%s%s)\n",
      n, api_writes, host_writes, paths.empty() ? "" : ": ", paths.c_str());
  std::printf(
      "  peer  kubectl apply --server-side (2 manifests)   %7.3f s  "
      "(gpunode/peer %.2f)\n",
      a, n / a);
  return 0;
}
