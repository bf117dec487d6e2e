// The health and fabric fields that query_nvml reads in its NVML session,
// against the stand-in libnvidia-ml.so.1 (test/stubs/stub_nvidia_ml.c),
// one case of it per test through GPUNODE_STUB_NVML_* variables.
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "gpu/nvml.hpp"
#include "h200_health.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

const char* kStubVars[] = {
    "GPUNODE_STUB_NVML_INIT",     "GPUNODE_STUB_NVML_GPUS",
    "GPUNODE_STUB_NVML_FABRIC",   "GPUNODE_STUB_NVML_FABRIC_STATUS",
    "GPUNODE_STUB_NVML_ECC",      "GPUNODE_STUB_NVML_REMAP",
    "GPUNODE_STUB_NVML_RETIRED",  "GPUNODE_STUB_NVML_PERSISTENCE",
    "GPUNODE_STUB_NVML_OLD",      "GPUNODE_STUB_NVML_ECC_AGGREGATE",
    "GPUNODE_STUB_NVML_ECC_MODE",
};

// The stub, with every case variable cleared first (the default: the real
// H200), then `set` applied.
struct Stub {
  Stub() {
    for (const char* var : kStubVars) env.unset(var);
  }
  std::vector<GpuInfo> gpus() {
    NvmlAnswer answer = query_nvml(std::string(GPUNODE_TEST_STUB_DRIVER) +
                                   "/libnvidia-ml.so.1");
    REQUIRE(answer.outcome == NvmlOutcome::kOk);
    REQUIRE(answer.inventory.ok());
    return answer.inventory->gpus;
  }
  GpuHealth only() {
    auto all = gpus();
    REQUIRE(all.size() == 1);
    return all[0].health;
  }
  test::ScopedEnv env;
};

TEST_CASE("NVML health of the stand-in's default is the real H200's",
          "[health]") {
  Stub stub;
  auto gpus = stub.gpus();
  REQUIRE(gpus.size() == 1);
  CHECK(gpus[0].name == "NVIDIA H200 (fake NVML)");
  test::check_real_h200_health(gpus[0].health);
}

TEST_CASE("NVML health of an 8-GPU board: a bus id, minor and UUID each",
          "[health]") {
  Stub stub;
  stub.env.set("GPUNODE_STUB_NVML_GPUS", "8");
  auto gpus = stub.gpus();
  REQUIRE(gpus.size() == 8);
  std::set<std::string> buses, uuids;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    CHECK(gpus[i].health.minor_number == std::optional<unsigned>(i));
    buses.insert(gpus[i].health.pci_bus_id);
    uuids.insert(gpus[i].uuid);
  }
  CHECK(buses.size() == 8);
  CHECK(uuids.size() == 8);
  CHECK(gpus[0].health.pci_bus_id == "00000000:18:00.0");
  CHECK(gpus[7].health.pci_bus_id == "00000000:88:00.0");
}

TEST_CASE("NVML fabric states map onto GpuHealth::Fabric", "[health]") {
  struct Case {
    const char* state;
    GpuHealth::Fabric fabric;
    const char* status;
  };
  const Case cases[] = {
      {"not-supported", GpuHealth::Fabric::kNotSupported, ""},
      {"call-not-supported", GpuHealth::Fabric::kNotSupported, ""},
      {"not-started", GpuHealth::Fabric::kNotStarted, ""},
      {"in-progress", GpuHealth::Fabric::kInProgress, ""},
      {"completed", GpuHealth::Fabric::kCompleted, "Success"},
      // A state newer than gpunode's table is not taken for any known one.
      {"from-the-future", GpuHealth::Fabric::kUnknown, ""},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.state) {
      Stub stub;
      stub.env.set("GPUNODE_STUB_NVML_FABRIC", c.state);
      const GpuHealth h = stub.only();
      CHECK(h.fabric == c.fabric);
      CHECK(h.fabric_status == c.status);
    }
  }
}

TEST_CASE("a completed fabric registration that failed keeps NVML's text",
          "[health]") {
  Stub stub;
  stub.env.set("GPUNODE_STUB_NVML_FABRIC", "completed");
  stub.env.set("GPUNODE_STUB_NVML_FABRIC_STATUS", "999");
  const GpuHealth h = stub.only();
  CHECK(h.fabric == GpuHealth::Fabric::kCompleted);
  CHECK(h.fabric_status == "Unknown Error");
}

TEST_CASE("NVML's volatile uncorrectable ECC count is read per GPU",
          "[health]") {
  Stub stub;
  stub.env.set("GPUNODE_STUB_NVML_GPUS", "8");
  stub.env.set("GPUNODE_STUB_NVML_ECC", "3:5");
  auto gpus = stub.gpus();
  REQUIRE(gpus.size() == 8);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    CHECK(gpus[i].health.ecc_uncorrectable_volatile ==
          std::optional<std::uint64_t>(i == 3 ? 5 : 0));
  }
}

TEST_CASE(
    "NVML's ECC count unreadable (the not-available sentinel, an error "
    "code) is said, not taken as zero",
    "[health]") {
  Stub stub;
  stub.env.set("GPUNODE_STUB_NVML_GPUS", "2");
  for (const auto& [setting, said] :
       std::vector<std::pair<std::string, std::string>>{
           {"1:18446744073709551615", "18446744073709551615"},
           {"1:rc=999", "NVML error 999"},
           {"1:rc=4", "NVML error 4"}}) {
    INFO(setting);
    stub.env.set("GPUNODE_STUB_NVML_ECC", setting);
    auto gpus = stub.gpus();
    REQUIRE(gpus.size() == 2);
    CHECK(gpus[0].health.ecc_uncorrectable_volatile ==
          std::optional<std::uint64_t>(0));
    CHECK(gpus[0].health.ecc_unreadable.empty());
    CHECK_FALSE(gpus[1].health.ecc_uncorrectable_volatile.has_value());
    CHECK(gpus[1].health.ecc_unreadable == said);
  }
  // ECC off answers NOT_SUPPORTED: nothing to say.
  stub.env.set("GPUNODE_STUB_NVML_ECC", "1:rc=3");
  stub.env.set("GPUNODE_STUB_NVML_ECC_MODE", "1:off");
  auto gpus = stub.gpus();
  CHECK(gpus[1].health.ecc_mode_enabled == std::optional<bool>(false));
  CHECK(gpus[1].health.ecc_unreadable.empty());
  CHECK_FALSE(gpus[1].health.ecc_uncorrectable_volatile.has_value());
  // With ECC on, NOT_SUPPORTED is no count either: unknown, not none.
  stub.env.unset("GPUNODE_STUB_NVML_ECC_MODE");
  gpus = stub.gpus();
  CHECK(gpus[1].health.ecc_mode_enabled == std::optional<bool>(true));
  CHECK(gpus[1].health.ecc_unreadable == "NVML error 3");
  CHECK_FALSE(gpus[1].health.ecc_uncorrectable_volatile.has_value());
}

TEST_CASE("NVML's aggregate uncorrectable ECC count is read apart",
          "[health]") {
  Stub stub;
  stub.env.set("GPUNODE_STUB_NVML_GPUS", "2");
  stub.env.set("GPUNODE_STUB_NVML_ECC_AGGREGATE", "1:3");
  auto gpus = stub.gpus();
  REQUIRE(gpus.size() == 2);
  CHECK(gpus[0].health.ecc_uncorrectable_aggregate ==
        std::optional<std::uint64_t>(0));
  CHECK(gpus[1].health.ecc_uncorrectable_aggregate ==
        std::optional<std::uint64_t>(3));
  CHECK(gpus[1].health.ecc_uncorrectable_volatile ==
        std::optional<std::uint64_t>(0));
  stub.env.set("GPUNODE_STUB_NVML_ECC_AGGREGATE", "1:rc=999");
  gpus = stub.gpus();
  CHECK_FALSE(gpus[1].health.ecc_uncorrectable_aggregate.has_value());
  CHECK(gpus[1].health.ecc_aggregate_unreadable == "NVML error 999");
}

TEST_CASE("NVML row remapping: pending and failed, on the GPU named",
          "[health]") {
  Stub stub;
  stub.env.set("GPUNODE_STUB_NVML_GPUS", "2");
  SECTION("pending") {
    stub.env.set("GPUNODE_STUB_NVML_REMAP", "1:pending");
    auto gpus = stub.gpus();
    REQUIRE(gpus.size() == 2);
    CHECK(gpus[0].health.remapping_pending == std::optional<bool>(false));
    CHECK(gpus[1].health.remapping_pending == std::optional<bool>(true));
    CHECK(gpus[1].health.remapping_failed == std::optional<bool>(false));
  }
  SECTION("failed") {
    stub.env.set("GPUNODE_STUB_NVML_REMAP", "0:failed");
    auto gpus = stub.gpus();
    REQUIRE(gpus.size() == 2);
    CHECK(gpus[0].health.remapping_failed == std::optional<bool>(true));
    CHECK(gpus[0].health.remapping_pending == std::optional<bool>(false));
    CHECK(gpus[1].health.remapping_failed == std::optional<bool>(false));
  }
}

TEST_CASE("NVML retired pages pending and persistence mode off", "[health]") {
  Stub stub;
  SECTION("retired pages pending (a pre-Ampere GPU)") {
    stub.env.set("GPUNODE_STUB_NVML_GPUS", "2");
    stub.env.set("GPUNODE_STUB_NVML_RETIRED", "0");
    auto gpus = stub.gpus();
    REQUIRE(gpus.size() == 2);
    CHECK(gpus[0].health.retired_pages_pending == std::optional<bool>(true));
    CHECK(gpus[1].health.retired_pages_pending == std::optional<bool>(false));
  }
  SECTION("persistence off") {
    stub.env.set("GPUNODE_STUB_NVML_PERSISTENCE", "off");
    CHECK(stub.only().persistence_mode == std::optional<bool>(false));
  }
}

TEST_CASE("an old driver's NVML: health left empty, the inventory stands",
          "[health]") {
  Stub stub;
  stub.env.set("GPUNODE_STUB_NVML_OLD", "1");
  stub.env.set("GPUNODE_STUB_NVML_FABRIC", "completed");
  auto gpus = stub.gpus();
  REQUIRE(gpus.size() == 1);
  CHECK(gpus[0].uuid == "GPU-6f9abcd6-2781-31d5-1032-cc2f7821fbb8");
  const GpuHealth& h = gpus[0].health;
  CHECK(h.pci_bus_id.empty());
  CHECK_FALSE(h.minor_number.has_value());
  CHECK_FALSE(h.persistence_mode.has_value());
  CHECK(h.fabric == GpuHealth::Fabric::kUnknown);
  CHECK(h.fabric_status.empty());
  CHECK_FALSE(h.ecc_uncorrectable_volatile.has_value());
  CHECK_FALSE(h.retired_pages_pending.has_value());
  CHECK_FALSE(h.remapping_pending.has_value());
  CHECK_FALSE(h.remapping_failed.has_value());
}

TEST_CASE("nvmlInit_v2's driver-level failures are told apart", "[health]") {
  Stub stub;
  const std::string lib =
      std::string(GPUNODE_TEST_STUB_DRIVER) + "/libnvidia-ml.so.1";
  SECTION("driver not loaded (9)") {
    stub.env.set("GPUNODE_STUB_NVML_INIT", "9");
    NvmlAnswer a = query_nvml(lib);
    CHECK(a.outcome == NvmlOutcome::kDriverNotLoaded);
    REQUIRE_FALSE(a.inventory.ok());
    CHECK(a.inventory.error().exit == ExitCode::kBlocked);
    CHECK(a.inventory.error().message == "nvmlInit_v2: Driver Not Loaded (9)");
  }
  SECTION("library and kernel module differ (18)") {
    stub.env.set("GPUNODE_STUB_NVML_INIT", "18");
    NvmlAnswer a = query_nvml(lib);
    CHECK(a.outcome == NvmlOutcome::kVersionMismatch);
    REQUIRE_FALSE(a.inventory.ok());
    CHECK(a.inventory.error().exit == ExitCode::kBlocked);
  }
}

}  // namespace
}  // namespace gpunode
