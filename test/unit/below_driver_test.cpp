// The driver layer below NVML's answers (gpu/below_driver.hpp): device
// nodes, NVSwitch systems and Fabric Manager, against host trees from
// test/sim/host-tree.sh (--root, so CUDA is not asked; the CUDA and NVML
// stand-in cases are in driver_libraries_test.cpp).
#include <catch2/catch.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "driver_sim_host.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

using test::any_contains;
using DriverSim = test::DriverSimHost;

TEST_CASE(
    "below the driver: a healthy single H200 says it is not an "
    "NVSwitch system",
    "[driver][below-driver]") {
  DriverSim sim("good-v3");
  Check c = sim.check();
  INFO(c.code << ": " << c.summary << " / " << c.fix);
  REQUIRE(c.status == CheckStatus::kSatisfied);
  CHECK(any_contains(c.details,
                     "Fabric Manager: not an NVSwitch system (no NVSwitch on "
                     "the PCI bus"));
  CHECK(any_contains(c.details, "device nodes: /dev/nvidiactl"));
  CHECK(any_contains(c.details, "CUDA: not checked with --root"));
  CHECK(c.facts["fabric"]["nvswitch"] == false);
  CHECK(c.facts["device_nodes"]["missing"].empty());
  CHECK(c.facts["device_nodes"]["nvidia_uvm_loaded"] == true);
  CHECK(c.facts["cuda"]["checked"] == false);
  CHECK(sim.tree_unchanged());
}

TEST_CASE("below the driver: nvidia-uvm not loaded blocks, naming modprobe",
          "[driver][below-driver]") {
  DriverSim sim("no-uvm");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.uvm-missing");
  CHECK(c.exit == ExitCode::kBlocked);
  CHECK_THAT(c.summary,
             Catch::Contains("the nvidia-uvm kernel module is not loaded"));
  CHECK_THAT(c.fix, Catch::StartsWith("sudo modprobe nvidia-uvm && sudo "
                                      "nvidia-modprobe -u -c=0"));
  CHECK(c.facts["device_nodes"]["missing"] ==
        nlohmann::json({"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}));
  // The inventory stays a fact: the layer says what it found.
  CHECK(c.facts["gpu_count"] == 1);
  CHECK(sim.tree_unchanged());
}

TEST_CASE(
    "below the driver: nvidia-uvm loaded without its node needs only "
    "nvidia-modprobe",
    "[driver][below-driver]") {
  DriverSim sim("uvm-node-missing");
  Check c = sim.check();
  CHECK(c.code == "driver.uvm-missing");
  CHECK_THAT(c.summary,
             Catch::Contains("although the nvidia-uvm module is loaded"));
  CHECK_THAT(c.fix, Catch::StartsWith("sudo nvidia-modprobe -u -c=0"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE("below the driver: missing /dev/nvidiactl and GPU nodes block",
          "[driver][below-driver]") {
  DriverSim sim("no-device-nodes");
  Check c = sim.check();
  CHECK(c.code == "driver.device-node-missing");
  CHECK_THAT(c.summary, Catch::Contains("/dev/nvidiactl"));
  CHECK_THAT(c.summary, Catch::Contains("/dev/nvidia0 (GPU 0)"));
  CHECK_THAT(c.fix, Catch::StartsWith("sudo nvidia-modprobe -c=0"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE(
    "below the driver: a missing node is blocked before CUDA or "
    "Fabric Manager is asked",
    "[driver][below-driver]") {
  // An NVSwitch board without Fabric Manager AND without nvidia-uvm: the
  // lower part is named.
  DriverSim sim("hgx-no-fm");
  std::remove((sim.root + "/dev/nvidia-uvm").c_str());
  Check c = sim.check();
  CHECK(c.code == "driver.uvm-missing");
  CHECK_FALSE(c.facts.contains("fabric"));
}

TEST_CASE(
    "below the driver: an HGX board with Fabric Manager active is "
    "satisfied",
    "[driver][below-driver][fabric]") {
  DriverSim sim("hgx");
  Check c = sim.check();
  INFO(c.code << ": " << c.summary << " / " << c.fix);
  REQUIRE(c.status == CheckStatus::kSatisfied);
  CHECK(any_contains(c.details,
                     "Fabric Manager 580.159.04: active; this is "
                     "an NVSwitch system (4 NVSwitch(es) on the "
                     "PCI bus, 4 /dev/nvidia-nvswitch node(s))"));
  const auto& fm = c.facts["fabric"]["fabric_manager"];
  CHECK(fm["service"] == "active");
  CHECK(fm["installed"] == true);
  CHECK(fm["version"] == "580.159.04");
  CHECK(c.facts["fabric"]["nvswitch"] == true);
  CHECK(sim.tree_unchanged());
}

TEST_CASE(
    "below the driver: an HGX board without Fabric Manager names the "
    "exact package",
    "[driver][below-driver][fabric]") {
  DriverSim sim("hgx-no-fm");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.fabric-manager-missing");
  CHECK_THAT(c.summary, Catch::Contains("this is an NVSwitch system"));
  CHECK_THAT(c.summary, Catch::Contains("802"));
  CHECK_THAT(c.fix,
             Catch::Contains("sudo apt-get install nvidia-fabricmanager-580="
                             "580.159.04-1"));
  CHECK_THAT(c.fix, Catch::Contains("nvidia-fabricmanager-580-580.159.04-1"));
  CHECK(c.facts["fabric"]["fabric_manager"]["installed"] == false);
  CHECK(sim.tree_unchanged());
}

TEST_CASE("below the driver: Fabric Manager installed but stopped",
          "[driver][below-driver][fabric]") {
  DriverSim sim("hgx-fm-stopped");
  Check c = sim.check();
  CHECK(c.code == "driver.fabric-manager-inactive");
  CHECK_THAT(c.summary, Catch::Contains("(systemctl: inactive)"));
  CHECK_THAT(c.fix, Catch::StartsWith(
                        "sudo systemctl enable --now nvidia-fabricmanager"));
  CHECK(c.facts["fabric"]["fabric_manager"]["service"] == "inactive");
  CHECK(sim.tree_unchanged());
}

TEST_CASE(
    "below the driver: Fabric Manager of another version than the "
    "driver",
    "[driver][below-driver][fabric]") {
  DriverSim sim("hgx-fm-mismatch");
  Check c = sim.check();
  CHECK(c.code == "driver.fabric-manager-version");
  CHECK_THAT(c.summary, Catch::Contains("Fabric Manager 580.95.05 does not "
                                        "match driver 580.159.04"));
  CHECK_THAT(c.fix, Catch::Contains("nvidia-fabricmanager-580=580.159.04-1"));
  CHECK(sim.tree_unchanged());
}

std::string derived(const std::string& name) {
  return std::string(GPUNODE_TEST_FIXTURES) + "/gpu/derived/" + name;
}

// Makes `sim` an HGX board of 8 GPUs whose nvidia-smi -q is the derived
// reading `q`.
void hgx_board(DriverSim& sim, const std::string& q) {
  sim.env.set("GPUNODE_SIM_GPU_COUNT", "8");
  sim.env.set("GPUNODE_SIM_GPU_Q", derived(q));
}

TEST_CASE("below the driver: an HGX board whose fabric is complete",
          "[driver][below-driver][fabric]") {
  DriverSim sim("hgx");
  hgx_board(sim, "hgx-8gpu-q-fabric-completed.txt");
  Check c = sim.check();
  INFO(c.code << ": " << c.summary << " / " << c.fix);
  REQUIRE(c.status == CheckStatus::kSatisfied);
  CHECK_THAT(c.summary, Catch::StartsWith("8 GPUs: 8x NVIDIA H200"));
  CHECK(c.facts["fabric"]["evidence"].front() == "GPU fabric state reported");
  CHECK(c.facts["fabric"]["gpus"].size() == 8);
  CHECK(c.facts["fabric"]["gpus"][7]["state"] == "completed");
  CHECK(any_contains(c.details, "fabric complete on every GPU"));
}

TEST_CASE("below the driver: Fabric Manager runs but the fabric is not set up",
          "[driver][below-driver][fabric]") {
  DriverSim sim("hgx");
  hgx_board(sim, "hgx-8gpu-q-fabric-not-started.txt");
  Check c = sim.check();
  CHECK(c.code == "driver.fabric-incomplete");
  CHECK_THAT(c.summary,
             Catch::Contains("GPU 0 not-started, GPU 1 not-started"));
  CHECK(c.facts["fabric"]["gpus"][0]["state"] == "not-started");
  CHECK(sim.tree_unchanged());
}

TEST_CASE(
    "below the driver: a stopped Fabric Manager is named before the "
    "fabric state it causes",
    "[driver][below-driver][fabric]") {
  DriverSim sim("hgx-fm-stopped");
  hgx_board(sim, "hgx-8gpu-q-fabric-in-progress.txt");
  Check c = sim.check();
  CHECK(c.code == "driver.fabric-manager-inactive");
  CHECK(c.facts["fabric"]["gpus"][3]["state"] == "in-progress");
}

TEST_CASE("below the driver: GPU fabric states alone make an NVSwitch system",
          "[driver][below-driver][fabric]") {
  // No NVSwitch visible on the bus (a VM given the GPUs only), but the GPUs
  // report a fabric: Fabric Manager is still needed.
  DriverSim sim("good-v3");
  hgx_board(sim, "hgx-8gpu-q-fabric-not-started.txt");
  Check c = sim.check();
  CHECK(c.code == "driver.fabric-manager-missing");
  CHECK(c.facts["fabric"]["evidence"] ==
        nlohmann::json({"GPU fabric state reported"}));
}

TEST_CASE(
    "health: an Xid the device plugin counts names the GPU, as a "
    "warning",
    "[driver][below-driver][health]") {
  DriverSim sim("hgx");
  hgx_board(sim, "hgx-8gpu-q-fabric-completed.txt");
  sim.env.set("GPUNODE_SIM_KERNEL_LOG", derived("dmesg-xid-79.txt"));
  Check c = sim.check();
  REQUIRE(c.status == CheckStatus::kSatisfied);
  CHECK(any_contains(c.warnings,
                     "GPU 2 (00000000:38:00.0) had Xid 79 (GPU has fallen "
                     "off the bus) since boot"));
  CHECK(any_contains(c.warnings, "the device plugin marks the GPU unhealthy"));
  CHECK(any_contains(c.warnings, "sudo nvidia-smi -r -i 2"));
  REQUIRE(c.facts["health"].size() == 1);
  CHECK(c.facts["health"][0]["gpu"] == 2);
  CHECK(c.facts["health"][0]["xid"] == 79);
  CHECK(c.facts["health"][0]["unhealthy"] == true);
  CHECK(c.facts["health"][0]["bus_id"] == "00000000:38:00.0");
}

TEST_CASE("health: contained and uncontained ECC Xids on two GPUs",
          "[driver][below-driver][health]") {
  DriverSim sim("hgx");
  hgx_board(sim, "hgx-8gpu-q-fabric-completed.txt");
  sim.env.set("GPUNODE_SIM_KERNEL_LOG", derived("dmesg-xid-94-95.txt"));
  Check c = sim.check();
  REQUIRE(c.facts["health"].size() == 2);
  CHECK(c.facts["health"][0]["gpu"] == 1);
  CHECK(c.facts["health"][0]["xid"] == 94);
  CHECK(c.facts["health"][1]["gpu"] == 4);
  CHECK(c.facts["health"][1]["xid"] == 95);
}

TEST_CASE("health: uncorrectable ECC errors and a pending row remap warn",
          "[driver][below-driver][health]") {
  DriverSim sim("good-v3");
  sim.env.set("GPUNODE_SIM_GPU_Q", derived("h200-q-ecc-remap-pending.txt"));
  Check c = sim.check();
  REQUIRE(c.status == CheckStatus::kSatisfied);
  CHECK(any_contains(c.warnings, "GPU 0 (00000000:00:06.0) has"));
  CHECK(any_contains(c.warnings,
                     "uncorrectable ECC error(s) since the "
                     "driver loaded"));
  CHECK(any_contains(c.warnings, "memory rows waiting to be remapped"));
  std::vector<std::string> kinds;
  for (const auto& f : c.facts["health"]) kinds.push_back(f["kind"]);
  CHECK(kinds == std::vector<std::string>{"ecc", "row-remap"});
}

TEST_CASE(
    "health: an uncorrectable ECC count nvidia-smi -q cannot give is a "
    "warning naming the GPU, never 'no errors'",
    "[driver][below-driver][health]") {
  DriverSim sim("good-v3");
  const std::string reading =
      test::read_text(derived("h200-q-ecc-remap-pending.txt"));
  const std::string counted = "DRAM Uncorrectable                         : 2";
  REQUIRE(reading.find(counted) != std::string::npos);
  for (const std::string value :
       {"18446744073709551615", "-3", "0x1F", "Unknown Error"}) {
    INFO(value);
    std::string text = reading;
    text.replace(text.find(counted), counted.size(),
                 "DRAM Uncorrectable                         : " + value);
    const std::string q = sim.root + "/nvidia-smi-q.txt";
    test::write_text(q, text);
    sim.env.set("GPUNODE_SIM_GPU_Q", q);
    Check c = sim.check();
    REQUIRE(c.status == CheckStatus::kSatisfied);
    CHECK(any_contains(c.warnings,
                       "GPU 0 (00000000:00:06.0) volatile uncorrectable ECC "
                       "error count could not be read (the driver reported '" +
                           value + "'): errors on it are unknown, not none"));
    CHECK(any_contains(c.warnings, "nvidia-smi -q -d ECC -i 0"));
    CHECK_FALSE(any_contains(c.warnings, "uncorrectable ECC error(s)"));
    bool found = false;
    for (const auto& f : c.facts["health"]) {
      if (f["kind"] != "ecc-unreadable") continue;
      found = true;
      CHECK(f["gpu"] == 0);
      CHECK(f["reported"] == value);
      CHECK(f["counter"] == "volatile");
    }
    CHECK(found);
    CHECK(c.facts["gpus"][0]["ecc"]["volatile_uncorrectable"] == nullptr);
  }
}

TEST_CASE(
    "health: with ECC on, N/A, empty or missing uncorrectable counts are "
    "unreadable (a warning naming the GPU), an aggregate count warns too, "
    "and --json carries the counters",
    "[driver][below-driver][health]") {
  DriverSim sim("good-v3");
  const std::string reading =
      test::read_text(test::fixture("gpu/h200-580.159.04/nvidia-smi-q.txt"));
  const std::string q = sim.root + "/nvidia-smi-q.txt";
  // The Volatile section's lines, and where the Aggregate one begins.
  const std::size_t vol = reading.find("        Volatile\n");
  const std::size_t agg = reading.find("        Aggregate\n");
  REQUIRE(vol != std::string::npos);
  REQUIRE(agg != std::string::npos);
  auto with_volatile = [&](const std::string& value, bool drop) {
    std::string text = reading;
    std::string section = text.substr(vol, agg - vol);
    std::string out;
    std::size_t at = 0;
    while (at < section.size()) {
      const std::size_t end = section.find('\n', at);
      std::string line = section.substr(at, end - at + 1);
      at = end + 1;
      if (line.find("Uncorrectable") != std::string::npos) {
        if (drop) continue;
        line = line.substr(0, line.find(": ") + 2) + value + "\n";
      }
      out += line;
    }
    text.replace(vol, agg - vol, out);
    return text;
  };
  for (const auto& [value, drop, reported] :
       std::vector<std::tuple<std::string, bool, std::string>>{
           {"N/A", false, "N/A"},
           {"", false, "(empty)"},
           {"", true, "(no line)"}}) {
    INFO(reported);
    test::write_text(q, with_volatile(value, drop));
    sim.env.set("GPUNODE_SIM_GPU_Q", q);
    Check c = sim.check();
    REQUIRE(c.status == CheckStatus::kSatisfied);
    CHECK(any_contains(c.warnings,
                       "GPU 0 (00000000:00:06.0) volatile uncorrectable ECC "
                       "error count could not be read (the driver reported '" +
                           reported + "')"));
    const auto& ecc = c.facts["gpus"][0]["ecc"];
    CHECK(ecc["mode"] == "enabled");
    CHECK(ecc["volatile_uncorrectable"] == nullptr);
    CHECK(ecc["aggregate_uncorrectable"] == 0);
  }
  // Aggregate 3 alone: a warning that says which counter.
  {
    std::string text = reading;
    const std::size_t dram = text.find("DRAM Uncorrectable", agg);
    REQUIRE(dram != std::string::npos);
    const std::size_t zero = text.find(": 0", dram);
    REQUIRE(zero != std::string::npos);
    text.replace(zero, 3, ": 3");
    test::write_text(q, text);
    sim.env.set("GPUNODE_SIM_GPU_Q", q);
    Check c = sim.check();
    REQUIRE(c.status == CheckStatus::kSatisfied);
    CHECK(any_contains(c.warnings,
                       "GPU 0 (00000000:00:06.0) has 3 uncorrectable ECC "
                       "error(s) over its life (aggregate counter)"));
    REQUIRE(c.facts["health"].size() == 1);
    CHECK(c.facts["health"][0]["kind"] == "ecc");
    CHECK(c.facts["health"][0]["counter"] == "aggregate");
    CHECK(c.facts["gpus"][0]["ecc"]["aggregate_uncorrectable"] == 3);
    CHECK(c.facts["gpus"][0]["ecc"]["volatile_uncorrectable"] == 0);
  }
  // ECC disabled: N/A is fine.
  {
    std::string text = with_volatile("N/A", false);
    const std::size_t mode = text.find("    ECC Mode\n");
    REQUIRE(mode != std::string::npos);
    const std::size_t on = text.find(": Enabled", mode);
    REQUIRE(on != std::string::npos);
    text.replace(on, 9, ": Disabled");
    test::write_text(q, text);
    sim.env.set("GPUNODE_SIM_GPU_Q", q);
    Check c = sim.check();
    REQUIRE(c.status == CheckStatus::kSatisfied);
    CHECK_FALSE(any_contains(c.warnings, "ECC"));
    CHECK(c.facts["gpus"][0]["ecc"]["mode"] == "disabled");
  }
}

TEST_CASE("health: an unreadable kernel log is said, and blocks nothing",
          "[driver][below-driver][health]") {
  DriverSim sim("good-v3");
  sim.env.set("GPUNODE_SIM_KERNEL_LOG", sim.root + "/no-such-log");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(any_contains(c.details, "kernel log not read (dmesg: exit code 1"));
  CHECK(any_contains(c.details, "Xid errors not checked"));
}

}  // namespace
}  // namespace gpunode
