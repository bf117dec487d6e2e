// parse_nvidia_smi_q against the real H200 readings, the derived HGX and
// failing-GPU readings (test/fixtures/gpu/derived, README there), the
// simulated nvidia-smi -q, and bad text.
#include "gpu/nvidia_smi_q.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "h200_health.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

std::vector<GpuHealth> parse_fixture(const std::string& relative) {
  const std::string text = test::read_text(test::fixture(relative));
  REQUIRE_FALSE(text.empty());
  auto parsed = parse_nvidia_smi_q(text);
  REQUIRE(parsed.ok());
  return *parsed;
}

// The one GPU block of `text`.
GpuHealth only_gpu(const std::string& text) {
  auto gpus = parse_nvidia_smi_q(text);
  REQUIRE(gpus.ok());
  REQUIRE(gpus->size() == 1);
  return (*gpus)[0];
}

TEST_CASE("nvidia-smi -q: the real H200 reading", "[health]") {
  CHECK(nvidia_smi_q_argv() == std::vector<std::string>{"nvidia-smi", "-q"});
  auto gpus = parse_fixture("gpu/h200-580.159.04/nvidia-smi-q.txt");
  REQUIRE(gpus.size() == 1);
  test::check_real_h200_health(gpus[0]);
}

TEST_CASE("nvidia-smi -q -d ECC,...: the real H200's ECC sections",
          "[health]") {
  auto gpus = parse_fixture("gpu/h200-580.159.04/nvidia-smi-q-ecc.txt");
  REQUIRE(gpus.size() == 1);
  const GpuHealth& h = gpus[0];
  CHECK(h.pci_bus_id == "00000000:00:06.0");
  CHECK(h.ecc_uncorrectable_volatile == std::optional<std::uint64_t>(0));
  CHECK(h.remapping_pending == std::optional<bool>(false));
  // -d prints only the sections asked for.
  CHECK_FALSE(h.persistence_mode.has_value());
  CHECK(h.fabric == GpuHealth::Fabric::kUnknown);
}

TEST_CASE("nvidia-smi -q: an HGX board's fabric, by Fabric Manager's state",
          "[health]") {
  struct Case {
    const char* file;
    GpuHealth::Fabric fabric;
    const char* status;
  };
  const Case cases[] = {
      {"hgx-8gpu-q-fabric-completed.txt", GpuHealth::Fabric::kCompleted,
       "Success"},
      {"hgx-8gpu-q-fabric-not-started.txt", GpuHealth::Fabric::kNotStarted, ""},
      {"hgx-8gpu-q-fabric-in-progress.txt", GpuHealth::Fabric::kInProgress, ""},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.file) {
      auto gpus = parse_fixture(std::string("gpu/derived/") + c.file);
      REQUIRE(gpus.size() == 8);
      for (std::size_t i = 0; i < gpus.size(); ++i) {
        CHECK(gpus[i].fabric == c.fabric);
        CHECK(gpus[i].fabric_status == c.status);
        CHECK(gpus[i].minor_number == std::optional<unsigned>(i));
        CHECK(gpus[i].ecc_uncorrectable_volatile ==
              std::optional<std::uint64_t>(0));
      }
      CHECK(gpus[0].pci_bus_id == "00000000:18:00.0");
      CHECK(gpus[7].pci_bus_id == "00000000:88:00.0");
    }
  }
}

TEST_CASE("nvidia-smi -q: uncorrectable ECC errors and a row remap pending",
          "[health]") {
  auto gpus = parse_fixture("gpu/derived/h200-q-ecc-remap-pending.txt");
  REQUIRE(gpus.size() == 1);
  const GpuHealth& h = gpus[0];
  CHECK(h.ecc_uncorrectable_volatile == std::optional<std::uint64_t>(2));
  CHECK(h.remapping_pending == std::optional<bool>(true));
  CHECK(h.remapping_failed == std::optional<bool>(false));
  CHECK(h.fabric == GpuHealth::Fabric::kNotSupported);
}

TEST_CASE(
    "nvidia-smi -q: the volatile ECC total sums SRAM and DRAM, not the "
    "aggregate",
    "[health]") {
  const std::string text =
      "GPU 00000000:3B:00.0\n"
      "    ECC Errors\n"
      "        Volatile\n"
      "            SRAM Correctable                  : 9\n"
      "            SRAM Uncorrectable Parity         : 1\n"
      "            SRAM Uncorrectable SEC-DED        : 2\n"
      "            DRAM Uncorrectable                : 4\n"
      "        Aggregate\n"
      "            DRAM Uncorrectable                : 100\n"
      "    Remapped Rows\n"
      "        Pending                               : No\n"
      "        Remapping Failure Occurred            : Yes\n";
  const GpuHealth h = only_gpu(text);
  CHECK(h.ecc_uncorrectable_volatile == std::optional<std::uint64_t>(7));
  CHECK(h.remapping_failed == std::optional<bool>(true));
}

TEST_CASE("nvidia-smi -q: N/A, [N/A] and Not Supported leave fields empty",
          "[health]") {
  const std::string text =
      "GPU 00000000:3B:00.0\n"
      "    Persistence Mode                          : [N/A]\n"
      "    Minor Number                              : N/A\n"
      "    ECC Errors\n"
      "        Volatile\n"
      "            DRAM Uncorrectable                : N/A\n"
      "    Retired Pages\n"
      "        Pending Page Blacklist                : Not Supported\n"
      "    Remapped Rows                             : N/A\n"
      "    Fabric\n"
      "        State                                 : Not Supported\n"
      "        Status                                : N/A\n";
  const GpuHealth h = only_gpu(text);
  CHECK(h.pci_bus_id == "00000000:3B:00.0");
  CHECK_FALSE(h.persistence_mode.has_value());
  CHECK_FALSE(h.minor_number.has_value());
  CHECK_FALSE(h.ecc_uncorrectable_volatile.has_value());
  CHECK_FALSE(h.retired_pages_pending.has_value());
  CHECK_FALSE(h.remapping_pending.has_value());
  CHECK(h.fabric == GpuHealth::Fabric::kNotSupported);
  CHECK(h.fabric_status.empty());
}

TEST_CASE("nvidia-smi -q: a pre-Ampere GPU's retired pages pending",
          "[health]") {
  const GpuHealth h = only_gpu(
      "GPU 00000000:3B:00.0\n"
      "    Retired Pages\n"
      "        Pending Page Blacklist                : Yes\n");
  CHECK(h.retired_pages_pending == std::optional<bool>(true));
}

TEST_CASE("nvidia-smi -q: odd values and misplaced fields are not read",
          "[health]") {
  // A value that is not one of nvidia-smi's, a field at the wrong depth, a
  // key of another section, CRLF line ends, an unknown fabric state.
  const std::string text =
      "GPU 00000000:3B:00.0\r\n"
      "    Persistence Mode                          : Maybe\r\n"
      "    Minor Number                              : -1\r\n"
      "        Pending                               : Yes\r\n"
      "    Clocks Event Reasons\r\n"
      "        Pending                               : Yes\r\n"
      "    ECC Errors\r\n"
      "        DRAM Uncorrectable                    : 5\r\n"
      "        Volatile\r\n"
      "            DRAM Uncorrectable                : 99999999999999999999\r\n"
      "    Fabric\r\n"
      "        State                                 : Sideways\r\n";
  const GpuHealth h = only_gpu(text);
  CHECK(h.pci_bus_id == "00000000:3B:00.0");
  CHECK_FALSE(h.persistence_mode.has_value());
  CHECK_FALSE(h.minor_number.has_value());
  CHECK_FALSE(h.remapping_pending.has_value());
  CHECK_FALSE(h.ecc_uncorrectable_volatile.has_value());
  // Not a count (past 2^64-1): unknown, not zero.
  CHECK(h.ecc_unreadable == "99999999999999999999");
  CHECK(h.fabric == GpuHealth::Fabric::kUnknown);
}

TEST_CASE(
    "nvidia-smi -q: an uncorrectable count that is no number (2^64-1, -3, "
    "hex, text) is unreadable, and the total with it",
    "[health]") {
  for (const std::string value :
       {"18446744073709551615", "-3", "0x1F", "Unknown Error"}) {
    INFO(value);
    const GpuHealth h = only_gpu(
        "GPU 00000000:3B:00.0\n"
        "    ECC Errors\n"
        "        Volatile\n"
        "            SRAM Uncorrectable Parity         : 1\n"
        "            DRAM Uncorrectable                : " +
        value + "\n");
    CHECK_FALSE(h.ecc_uncorrectable_volatile.has_value());
    CHECK(h.ecc_unreadable == value);
  }
  // The largest count there can be is still one.
  const GpuHealth big = only_gpu(
      "GPU 00000000:3B:00.0\n"
      "    ECC Errors\n"
      "        Volatile\n"
      "            DRAM Uncorrectable                : 18446744073709551614\n");
  CHECK(big.ecc_uncorrectable_volatile ==
        std::optional<std::uint64_t>(18446744073709551614ULL));
  CHECK(big.ecc_unreadable.empty());
}

// A GPU block with ECC mode `mode` and the two counters' lines as given
// (the real H200's layout).
std::string ecc_block(const std::string& mode, const std::string& volatile_,
                      const std::string& aggregate) {
  return "GPU 00000000:00:06.0\n"
         "    ECC Mode\n"
         "        Current                                : " +
         mode +
         "\n"
         "        Pending                                : " +
         mode +
         "\n"
         "    ECC Errors\n"
         "        Volatile\n" +
         volatile_ + "        Aggregate\n" + aggregate +
         "        Aggregate Uncorrectable SRAM Sources\n"
         "            SRAM L2                            : 0\n";
}

std::string counters(const std::string& value) {
  return "            SRAM Correctable                   : 0\n"
         "            SRAM Uncorrectable Parity          : " +
         value +
         "\n"
         "            SRAM Uncorrectable SEC-DED         : " +
         value +
         "\n"
         "            DRAM Uncorrectable                 : " +
         value + "\n";
}

TEST_CASE(
    "nvidia-smi -q: with ECC mode Enabled, an uncorrectable count of N/A, "
    "empty or missing is unreadable, and with ECC off N/A is no count",
    "[health]") {
  for (const auto& [volatile_, reported] :
       std::vector<std::pair<std::string, std::string>>{
           {counters("N/A"), "N/A"},
           {counters(""), "(empty)"},
           {"            SRAM Correctable                   : 0\n",
            "(no line)"}}) {
    INFO(reported);
    const GpuHealth h =
        only_gpu(ecc_block("Enabled", volatile_, counters("0")));
    CHECK(h.ecc_mode_enabled == std::optional<bool>(true));
    CHECK_FALSE(h.ecc_uncorrectable_volatile.has_value());
    CHECK(h.ecc_unreadable == reported);
    // The aggregate counter read fine and stands on its own.
    CHECK(h.ecc_uncorrectable_aggregate == std::optional<std::uint64_t>(0));
    CHECK(h.ecc_aggregate_unreadable.empty());
  }
  // The aggregate counter is held to the same rule.
  const GpuHealth agg =
      only_gpu(ecc_block("Enabled", counters("0"), counters("N/A")));
  CHECK(agg.ecc_uncorrectable_volatile == std::optional<std::uint64_t>(0));
  CHECK(agg.ecc_aggregate_unreadable == "N/A");
  // ECC off: N/A is the GPU's plain answer.
  const GpuHealth off =
      only_gpu(ecc_block("Disabled", counters("N/A"), counters("N/A")));
  CHECK(off.ecc_mode_enabled == std::optional<bool>(false));
  CHECK(off.ecc_unreadable.empty());
  CHECK(off.ecc_aggregate_unreadable.empty());
  CHECK_FALSE(off.ecc_uncorrectable_volatile.has_value());
  CHECK_FALSE(off.ecc_uncorrectable_aggregate.has_value());
}

TEST_CASE("nvidia-smi -q: the Aggregate counters are summed apart",
          "[health]") {
  const GpuHealth h = only_gpu(
      ecc_block("Enabled", counters("0"),
                "            SRAM Uncorrectable Parity          : 1\n"
                "            DRAM Uncorrectable                 : 2\n"));
  CHECK(h.ecc_uncorrectable_volatile == std::optional<std::uint64_t>(0));
  CHECK(h.ecc_uncorrectable_aggregate == std::optional<std::uint64_t>(3));
}

TEST_CASE("nvidia-smi -q: text with no GPU block is a usage error",
          "[health]") {
  const char* bad[] = {
      "",
      "No devices were found\n",
      "\n==============NVSMI LOG==============\n\nAttached GPUs : 0\n",
      "    GPU 00000000:3B:00.0\n        Minor Number : 0\n",
      "GPU : 00000000:3B:00.0\n",
      "\x1b[2J\xff\xfe garbage\n",
  };
  for (const char* text : bad) {
    auto parsed = parse_nvidia_smi_q(text);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().exit == ExitCode::kUsage);
  }
}

TEST_CASE("the simulated nvidia-smi -q: one block per GPU, or a fixture",
          "[health]") {
  SECTION("three GPUs from the real reading") {
    test::Run run =
        test::run_with_sim({"nvidia-smi", "-q"}, {"GPUNODE_SIM_GPU_COUNT=3"});
    REQUIRE(run.exit_code == 0);
    auto gpus = parse_nvidia_smi_q(run.out);
    REQUIRE(gpus.ok());
    REQUIRE(gpus->size() == 3);
    test::check_real_h200_health((*gpus)[0]);
    CHECK((*gpus)[1].pci_bus_id == "00000000:00:07.0");
    CHECK((*gpus)[2].pci_bus_id == "00000000:00:08.0");
    CHECK((*gpus)[2].minor_number == std::optional<unsigned>(2));
  }
  SECTION("a derived reading") {
    test::Run run = test::run_with_sim(
        {"nvidia-smi", "-q"},
        {"GPUNODE_SIM_GPU_Q=" +
         test::fixture("gpu/derived/hgx-8gpu-q-fabric-completed.txt")});
    REQUIRE(run.exit_code == 0);
    auto gpus = parse_nvidia_smi_q(run.out);
    REQUIRE(gpus.ok());
    REQUIRE(gpus->size() == 8);
    CHECK((*gpus)[5].fabric == GpuHealth::Fabric::kCompleted);
  }
}

}  // namespace
}  // namespace gpunode
