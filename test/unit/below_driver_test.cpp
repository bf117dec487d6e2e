// The driver layer below NVML's answers (gpu/below_driver.hpp): device
// nodes, NVSwitch systems and Fabric Manager, against host trees from
// test/sim/host-tree.sh (--root, so CUDA is not asked; the CUDA and NVML
// stand-in cases are in driver_libraries_test.cpp).
#include <catch2/catch.hpp>
#include <string>

#include "driver_sim_host.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

using test::any_contains;
using DriverSim = test::DriverSimHost;

TEST_CASE("below the driver: a healthy single H200 says it is not an "
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

TEST_CASE("below the driver: nvidia-uvm loaded without its node needs only "
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
  CHECK_THAT(c.summary, Catch::Contains("1 of 1 /dev/nvidia<N>"));
  CHECK_THAT(c.fix, Catch::StartsWith("sudo nvidia-modprobe -c=0"));
  CHECK(sim.tree_unchanged());
}

TEST_CASE("below the driver: a missing node is blocked before CUDA or "
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

TEST_CASE("below the driver: an HGX board with Fabric Manager active is "
          "satisfied",
          "[driver][below-driver][fabric]") {
  DriverSim sim("hgx");
  Check c = sim.check();
  INFO(c.code << ": " << c.summary << " / " << c.fix);
  REQUIRE(c.status == CheckStatus::kSatisfied);
  CHECK(any_contains(c.details, "Fabric Manager 580.159.04: active; this is "
                                "an NVSwitch system (4 NVSwitch(es) on the "
                                "PCI bus, 4 /dev/nvidia-nvswitch node(s))"));
  const auto& fm = c.facts["fabric"]["fabric_manager"];
  CHECK(fm["service"] == "active");
  CHECK(fm["installed"] == true);
  CHECK(fm["version"] == "580.159.04");
  CHECK(c.facts["fabric"]["nvswitch"] == true);
  CHECK(sim.tree_unchanged());
}

TEST_CASE("below the driver: an HGX board without Fabric Manager names the "
          "exact package",
          "[driver][below-driver][fabric]") {
  DriverSim sim("hgx-no-fm");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "driver.fabric-manager-missing");
  CHECK_THAT(c.summary, Catch::Contains("this is an NVSwitch system"));
  CHECK_THAT(c.summary, Catch::Contains("802"));
  CHECK_THAT(c.fix, Catch::Contains(
                        "sudo apt-get install nvidia-fabricmanager-580="
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

TEST_CASE("below the driver: Fabric Manager of another version than the "
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

}  // namespace
}  // namespace gpunode
