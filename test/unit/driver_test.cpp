// The driver stage against simulated hosts: a host tree from
// test/sim/host-tree.sh (under --root, so NVML is not asked) and the
// simulated nvidia-smi from test/sim/bin, shaped by GPUNODE_SIM_GPU_*.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "driver_sim_host.hpp"
#include "gpunode/stage.hpp"
#include "gpunode/system_host.hpp"
#include "stages/stages.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

using test::any_contains;

using std::chrono::milliseconds;

using DriverSim = test::DriverSimHost;
using test::kSimVars;

TEST_CASE("the driver stage is named for its layer and changes nothing",
          "[driver]") {
  auto stage = make_driver_stage();
  REQUIRE(stage != nullptr);
  CHECK(stage->name() == "driver");
  CHECK(stage->layer() == "NVIDIA driver");
  DriverSim sim("good-v3");
  Context ctx(sim.host, sim.opts, sim.clock.steady_now());
  CHECK(stage->apply(ctx, Check{}).ok());
}

TEST_CASE("one healthy H200 is satisfied, with the inventory kept as a fact",
          "[driver]") {
  DriverSim sim("good-v3");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.code == "driver.ok");
  CHECK(c.summary ==
        "1 GPU: NVIDIA H200 (143771 MiB), driver 580.159.04, MIG disabled "
        "(nvidia-smi)");
  CHECK(c.warnings.empty());
  CHECK(any_contains(c.details,
                     "GPU 0: NVIDIA H200, GPU-6f9abcd6-2781-31d5-1032-"
                     "cc2f7821fbb8, 143771 MiB, MIG disabled"));
  CHECK(any_contains(c.details, "kernel module: NVIDIA 580.159.04"));
  CHECK(any_contains(c.details, "NVML: not used with --root"));
  REQUIRE(sim.facts.gpus.has_value());
  CHECK(sim.facts.gpus->source == "nvidia-smi");
  CHECK(sim.facts.gpus->driver_version == "580.159.04");
  CHECK(sim.facts.gpus->gpus.size() == 1);
  CHECK(sim.tree_unchanged());
}

TEST_CASE("eight identical GPUs are summarised as one group", "[driver]") {
  DriverSim sim("good-v3");
  sim.env.set("GPUNODE_SIM_GPU_COUNT", "8");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.summary ==
        "8 GPUs: 8x NVIDIA H200 (143771 MiB), driver 580.159.04, MIG disabled "
        "(nvidia-smi)");
  REQUIRE(sim.facts.gpus.has_value());
  REQUIRE(sim.facts.gpus->gpus.size() == 8);
  CHECK(sim.facts.gpus->gpus[7].index == 7);
  CHECK(sim.facts.gpus->gpus[7].uuid != sim.facts.gpus->gpus[0].uuid);
  CHECK(any_contains(c.details, "GPU 7: NVIDIA H200"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE("MIG enabled is satisfied but warns about migStrategy none",
          "[driver]") {
  DriverSim sim("good-v3");
  sim.env.set("GPUNODE_SIM_GPU_MIG", "Enabled");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK_THAT(c.summary, Catch::Contains("MIG enabled"));
  REQUIRE(c.warnings.size() == 1);
  CHECK_THAT(c.warnings[0], Catch::Contains("GPU 0") &&
                                Catch::Contains("migStrategy none") &&
                                Catch::Contains("nvidia.com/gpu"));
  CHECK(any_contains(c.details, "MIG enabled"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE("a unified-memory GPU reports no memory and is still satisfied",
          "[driver]") {
  DriverSim sim("good-v3");
  sim.env.set("GPUNODE_SIM_GPU_MEMORY", "[N/A]");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.summary ==
        "1 GPU: NVIDIA H200 (unified memory), driver 580.159.04, MIG disabled "
        "(nvidia-smi)");
  CHECK(any_contains(c.details, "memory not reported (unified memory)"));
  REQUIRE(sim.facts.gpus.has_value());
  CHECK_FALSE(sim.facts.gpus->gpus[0].memory_mib.has_value());
}

TEST_CASE("no kernel module is blocked before nvidia-smi is asked",
          "[driver]") {
  DriverSim sim("no-driver");
  // Were nvidia-smi asked, it would answer "ok".
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.module-not-loaded");
  CHECK(c.exit == ExitCode::kBlocked);
  CHECK_THAT(c.summary, Catch::Contains("/proc/driver/nvidia/version"));
  CHECK_THAT(c.fix, Catch::Contains("modprobe nvidia"));
  CHECK_FALSE(sim.facts.gpus.has_value());
  CHECK(sim.tree_unchanged());
}

TEST_CASE(
    "nvidia-smi that cannot reach the driver is blocked as no "
    "communication",
    "[driver]") {
  DriverSim sim("good-v3");
  sim.env.set("GPUNODE_SIM_GPU_MODE", "no-driver");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.no-communication");
  CHECK_THAT(c.summary, Catch::Contains("couldn't communicate"));
  CHECK_THAT(c.fix,
             Catch::Contains("reboot") && Catch::Contains("driver update"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE("a driver that sees no GPU is blocked as no GPUs", "[driver]") {
  DriverSim sim("good-v3");
  sim.env.set("GPUNODE_SIM_GPU_MODE", "no-devices");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.no-gpus");
  CHECK_THAT(c.summary, Catch::Contains("No devices were found"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE(
    "a module and user-space driver of different versions are blocked "
    "as a mismatch",
    "[driver]") {
  DriverSim sim("good-v3");
  sim.env.set("GPUNODE_SIM_GPU_DRIVER", "575.57.08");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.version-mismatch");
  CHECK_THAT(c.summary,
             Catch::Contains("580.159.04") && Catch::Contains("575.57.08"));
  CHECK_THAT(c.fix, Catch::Contains("reboot"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE("a driver older than --min-driver is blocked, naming both versions",
          "[driver]") {
  DriverSim sim("good-v3");
  sim.opts.min_driver = "590.48.01";
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.too-old");
  CHECK_THAT(c.summary,
             Catch::Contains("580.159.04") && Catch::Contains("590.48.01"));
  CHECK_THAT(c.fix, Catch::Contains("590.48.01"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE("a driver at or above --min-driver is satisfied", "[driver]") {
  for (const char* min : {"550.54.15", "580.159.04", "580.159", "580"}) {
    INFO(min);
    DriverSim sim("good-v3");
    sim.opts.min_driver = min;
    Check c = sim.check();
    CHECK(c.status == CheckStatus::kSatisfied);
    CHECK(c.warnings.empty());
  }
}

TEST_CASE("an old proprietary driver is read from /proc and judged too old",
          "[driver]") {
  DriverSim sim("good-v3");
  test::write_text(
      sim.root + "/proc/driver/nvidia/version",
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  "
      "Sun May 12 19:39:15 UTC 2024\nGCC version:  gcc version "
      "12.2.0 (Debian 12.2.0-14)\n",
      0444);
  sim.env.set("GPUNODE_SIM_GPU_DRIVER", "535.183.01");
  sim.opts.min_driver = "550.54.15";
  Check c = sim.check();
  CHECK(c.code == "driver.too-old");
  CHECK_THAT(c.summary,
             Catch::Contains("535.183.01") && Catch::Contains("550.54.15"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE("no way to ask the driver is blocked with the reason", "[driver]") {
  DriverSim sim("good-v3");
  test::TempDir empty;
  // bash for nothing: nvidia-smi simply is not on this PATH.
  sim.env.set("PATH", empty.path());
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.no-query");
  CHECK_THAT(c.summary,
             Catch::Contains("not on PATH") && Catch::Contains("--root"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE("a hung nvidia-smi is killed at the run's deadline", "[driver]") {
  DriverSim sim("good-v3");
  sim.env.set("GPUNODE_SIM_GPU_MODE", "hang");
  Check c = sim.check(milliseconds(300));
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.query-timeout");
  CHECK(c.exit == ExitCode::kTimeout);
  CHECK_THAT(c.summary, Catch::Contains("300 ms"));
}

TEST_CASE("an unfamiliar /proc version text warns and still checks the GPUs",
          "[driver]") {
  DriverSim sim("good-v3");
  test::write_text(sim.root + "/proc/driver/nvidia/version", "something new\n");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(any_contains(c.warnings, "NVRM version"));
}

TEST_CASE("the driver stage's inputs name root, --min-driver and the module",
          "[driver]") {
  DriverSim sim("good-v3");
  sim.opts.min_driver = "550.54.15";
  Context ctx(sim.host, sim.opts, sim.clock.steady_now());
  const std::string in = make_driver_stage()->inputs(ctx);
  CHECK_THAT(in, Catch::Contains("root=" + sim.root) &&
                     Catch::Contains("min_driver=550.54.15") &&
                     Catch::Contains("NVIDIA UNIX Open Kernel Module for "
                                     "x86_64  580.159.04"));
  sim.opts.min_driver = "590.48.01";
  CHECK(make_driver_stage()->inputs(ctx) != in);
}

TEST_CASE("driver facts: the H200's inventory as fields (docs/json-events.md)",
          "[driver][facts]") {
  DriverSim sim("good-v3");
  SECTION("one GPU, no minimum") {
    Check c = sim.check();
    REQUIRE(c.status == CheckStatus::kSatisfied);
    CHECK(c.facts["driver_version"] == "580.159.04");
    CHECK(c.facts["module_version"] == "580.159.04");
    CHECK(c.facts["source"] == "nvidia-smi");
    CHECK(c.facts["gpu_count"] == 1);
    CHECK(c.facts["gpus"] ==
          nlohmann::json::array(
              {{{"index", 0},
                {"name", "NVIDIA H200"},
                {"uuid", "GPU-6f9abcd6-2781-31d5-1032-cc2f7821fbb8"},
                {"memory_mib", 143771},
                {"mig_mode", "disabled"},
                {"ecc",
                 {{"mode", "enabled"},
                  {"volatile_uncorrectable", 0},
                  {"aggregate_uncorrectable", 0}}}}}));
    CHECK_FALSE(c.facts.contains("min_driver"));
  }
  SECTION("eight GPUs and --min-driver, also when it blocks") {
    sim.env.set("GPUNODE_SIM_GPU_COUNT", "8");
    sim.opts.min_driver = "999.1";
    Check c = sim.check();
    REQUIRE(c.code == "driver.too-old");
    CHECK(c.facts["gpu_count"] == 8);
    REQUIRE(c.facts["gpus"].size() == 8);
    CHECK(c.facts["gpus"][7]["index"] == 7);
    CHECK(c.facts["min_driver"] == "999.1");
  }
  SECTION("no module loaded: no inventory, no GPU fields") {
    std::filesystem::remove(sim.root + "/proc/driver/nvidia/version");
    Check c = sim.check();
    REQUIRE(c.code == "driver.module-not-loaded");
    CHECK_FALSE(c.facts.contains("gpus"));
    CHECK_FALSE(c.facts.contains("driver_version"));
  }
}

}  // namespace
}  // namespace gpunode
