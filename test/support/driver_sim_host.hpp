// A simulated GPU host for the driver layer's tests, over the one host bed
// (host_bed.hpp): a host tree from test/sim/host-tree.sh under a temporary
// root (so NVML and CUDA are not asked: --root), and the simulated
// nvidia-smi, dmesg and systemctl first on PATH.
// use_libraries() turns it into a host at "/" whose file system is still
// the tree, with NVML and libcuda the stand-ins in build/test/stub-driver.
#pragma once

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "gpunode/context.hpp"
#include "gpunode/stage.hpp"
#include "gpunode/system_host.hpp"
#include "host_bed.hpp"
#include "stages/stages.hpp"
#include "test_support.hpp"

namespace gpunode::test {

using std::chrono::milliseconds;

inline const char* kSimVars[] = {
    "GPUNODE_SIM_GPU_MODE",   "GPUNODE_SIM_GPU_COUNT",  "GPUNODE_SIM_GPU_MIG",
    "GPUNODE_SIM_GPU_MEMORY", "GPUNODE_SIM_GPU_DRIVER", "GPUNODE_SIM_GPU_Q",
    "GPUNODE_SIM_KERNEL_LOG"};

// A host tree under a temporary root (the one host bed), with the
// simulated nvidia-smi first on PATH and no GPU scenario variable left from
// the caller's environment.
struct DriverSimHost : HostBed {
  explicit DriverSimHost(const std::string& scenario) : HostBed(scenario) {
    for (const char* var : kSimVars) env.unset(var);
    use_sim_programs();
  }

  // A host at "/" (NVML and CUDA asked) over the same tree, with the
  // stand-in libraries.
  void use_libraries() {
    opts.root = "/";
    opts.nvml_library =
        std::string(GPUNODE_TEST_STUB_DRIVER) + "/libnvidia-ml.so.1";
    opts.cuda_library = std::string(GPUNODE_TEST_STUB_DRIVER) + "/libcuda.so.1";
  }

  // Runs check() with `time_left` before the run's deadline.
  Check check(milliseconds time_left = std::chrono::minutes(10)) {
    Context ctx = context(time_left);
    auto stage = make_driver_stage();
    before = snapshot_tree(root);
    Check c = stage->check(ctx);
    // What the driver layer counted, as a later stage would read it.
    facts.gpus.reset();
    if (auto found = ctx.gpus()) facts.gpus = **found;
    return c;
  }

  bool tree_unchanged() const { return snapshot_tree(root) == before; }

  struct {
    std::optional<GpuInventory> gpus;
  } facts;
};

}  // namespace gpunode::test
