// The driver layer's pure parts: the nvidia-smi CSV parser, the
// /proc/driver/nvidia/version parser, version order, and how nvidia-smi's
// failures are told apart (with a scripted ProcessRunner).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "gpu/driver_version.hpp"
#include "gpu/nvidia_smi.hpp"
#include "gpu/nvml.hpp"
#include "scripted_runner.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

const char* kH200Uuid = "GPU-6f9abcd6-2781-31d5-1032-cc2f7821fbb8";

std::string h200_csv() {
  return test::read_text(
      test::fixture("gpu/h200-580.159.04/nvidia-smi-query-gpu.csv"));
}

TEST_CASE("the real H200 query line parses, its two extra columns ignored",
          "[driver]") {
  const std::string text = h200_csv();
  REQUIRE(text.find("9.0, 00000000:00:06.0") != std::string::npos);
  auto inv = parse_query_gpu_csv(text);
  REQUIRE(inv.ok());
  CHECK(inv->source == "nvidia-smi");
  CHECK(inv->driver_version == "580.159.04");
  REQUIRE(inv->gpus.size() == 1);
  const GpuInfo& gpu = inv->gpus[0];
  CHECK(gpu.index == 0);
  CHECK(gpu.name == "NVIDIA H200");
  CHECK(gpu.uuid == kH200Uuid);
  REQUIRE(gpu.memory_mib.has_value());
  CHECK(*gpu.memory_mib == 143771);
  CHECK(gpu.mig == GpuInfo::Mig::kDisabled);
}

TEST_CASE("eight GPU lines give eight GPUs in order", "[driver]") {
  std::string text;
  for (int i = 0; i < 8; ++i) {
    text += std::to_string(i) + ", NVIDIA H200, GPU-" + std::to_string(i) +
            ", 143771 MiB, 580.159.04, Disabled\n";
  }
  auto inv = parse_query_gpu_csv(text);
  REQUIRE(inv.ok());
  REQUIRE(inv->gpus.size() == 8);
  for (int i = 0; i < 8; ++i) {
    CHECK(inv->gpus[i].index == i);
    CHECK(inv->gpus[i].uuid == "GPU-" + std::to_string(i));
  }
}

TEST_CASE("memory and MIG values nvidia-smi really prints are understood",
          "[driver]") {
  struct Row {
    std::string memory;
    std::string mig;
    std::optional<std::uint64_t> memory_mib;
    GpuInfo::Mig mig_mode;
  };
  const std::vector<Row> rows = {
      {"143771 MiB", "Disabled", 143771, GpuInfo::Mig::kDisabled},
      {"143771 MiB", "Enabled", 143771, GpuInfo::Mig::kEnabled},
      {"23034 MiB", "[N/A]", 23034, GpuInfo::Mig::kUnsupported},
      {"[N/A]", "Disabled", std::nullopt, GpuInfo::Mig::kDisabled},
      {"[Not Supported]", "[N/A]", std::nullopt, GpuInfo::Mig::kUnsupported},
      {"N/A", "N/A", std::nullopt, GpuInfo::Mig::kUnsupported},
      {"97871", "Disabled", 97871, GpuInfo::Mig::kDisabled},  // nounits
  };
  for (const auto& row : rows) {
    INFO("memory '" << row.memory << "', MIG '" << row.mig << "'");
    auto inv = parse_query_gpu_csv("0, NVIDIA GB10, GPU-x, " + row.memory +
                                   ", 580.95.05, " + row.mig + "\n");
    REQUIRE(inv.ok());
    REQUIRE(inv->gpus.size() == 1);
    CHECK(inv->gpus[0].memory_mib == row.memory_mib);
    CHECK(inv->gpus[0].mig == row.mig_mode);
  }
}

TEST_CASE("CRLF, padding and blank lines in nvidia-smi output are tolerated",
          "[driver]") {
  auto inv = parse_query_gpu_csv(
      "\r\n  0 ,  NVIDIA L4 , GPU-a ,  23034 MiB , 595.71.05 , Disabled \r\n"
      "\n1, NVIDIA L4, GPU-b, 23034 MiB, 595.71.05, Disabled\r\n\r\n");
  REQUIRE(inv.ok());
  REQUIRE(inv->gpus.size() == 2);
  CHECK(inv->gpus[0].name == "NVIDIA L4");
  CHECK(inv->gpus[0].uuid == "GPU-a");
  CHECK(inv->gpus[1].index == 1);
  CHECK(inv->driver_version == "595.71.05");
}

TEST_CASE("empty nvidia-smi output is zero GPUs, not an error", "[driver]") {
  auto inv = parse_query_gpu_csv("");
  REQUIRE(inv.ok());
  CHECK(inv->gpus.empty());
}

TEST_CASE("a malformed query line is a usage error naming the line",
          "[driver]") {
  struct Row {
    std::string text;
    std::string expect;
  };
  const std::string good =
      "0, NVIDIA H200, GPU-a, 143771 MiB, 580.159.04, Disabled\n";
  const std::vector<Row> rows = {
      {good + "1, NVIDIA H200, GPU-b, 143771 MiB\n", "line 2"},
      {"x, NVIDIA H200, GPU-a, 143771 MiB, 580.159.04, Disabled\n",
       "index 'x'"},
      {"0, , GPU-a, 143771 MiB, 580.159.04, Disabled\n", "empty name"},
      {"0, NVIDIA H200, , 143771 MiB, 580.159.04, Disabled\n", "empty uuid"},
      {"0, NVIDIA H200, GPU-a, lots, 580.159.04, Disabled\n",
       "memory.total 'lots'"},
      {"0, NVIDIA H200, GPU-a, 143771 MiB, [N/A], Disabled\n",
       "driver_version '[N/A]'"},
      {"0, NVIDIA H200, GPU-a, 143771 MiB, 580.159.04, Maybe\n",
       "mig.mode.current 'Maybe'"},
      {good + "\n1, NVIDIA H200, GPU-b, 143771 MiB, 575.57.08, Disabled\n",
       "line 3"},
      {"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
       "driver.\n",
       "line 1"},
  };
  for (const auto& row : rows) {
    INFO(row.text);
    auto inv = parse_query_gpu_csv(row.text);
    REQUIRE_FALSE(inv.ok());
    CHECK(inv.error().exit == ExitCode::kUsage);
    CHECK_THAT(inv.error().message, Catch::Contains(row.expect));
  }
}

TEST_CASE("the real /proc/driver/nvidia/version gives the module version",
          "[driver]") {
  auto v = parse_proc_driver_version(test::read_text(
      test::fixture("gpu/h200-580.159.04/proc-driver-nvidia-version")));
  REQUIRE(v.ok());
  CHECK(*v == "580.159.04");
}

TEST_CASE("both forms of the NVRM line give the version", "[driver]") {
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 "
       "19:39:15 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian "
       "12.2.0-14)\n",
       "535.183.01"},
      {"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  "
       "Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:32:41 UTC "
       "2025\n",
       "580.95.05"},
      {"GCC version:  gcc version 12.2.0\nNVRM version: NVIDIA UNIX x86_64 "
       "Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n",
       "550.54.15"},
  };
  for (const auto& [text, version] : rows) {
    INFO(text);
    auto v = parse_proc_driver_version(text);
    REQUIRE(v.ok());
    CHECK(*v == version);
  }
}

TEST_CASE("a /proc version text without a version is an error", "[driver]") {
  CHECK_FALSE(parse_proc_driver_version("").ok());
  CHECK_FALSE(parse_proc_driver_version("GCC version:  gcc 12.2.0\n").ok());
  auto v =
      parse_proc_driver_version("NVRM version: NVIDIA UNIX Kernel Module\n");
  REQUIRE_FALSE(v.ok());
  CHECK_THAT(v.error().message, Catch::Contains("no version number"));
}

TEST_CASE("driver versions compare as numbers, component by component",
          "[driver]") {
  struct Row {
    const char* a;
    const char* b;
    int order;
  };
  const std::vector<Row> rows = {
      {"580.159.04", "550.54.15", 1},  {"550.54.15", "580.159.04", -1},
      {"580.159.04", "580.159.04", 0}, {"580.65", "580.65.06", -1},
      {"580.65", "580.65.0", 0},       {"535.183.01", "535.54.03", 1},
      {"1000.1", "999.99.99", 1},      {"580.159.4", "580.159.04", 0},
      {"580", "580.0.1", -1},
  };
  for (const auto& row : rows) {
    INFO(row.a << " vs " << row.b);
    auto c = compare_versions(row.a, row.b);
    REQUIRE(c.has_value());
    CHECK((*c > 0) - (*c < 0) == row.order);
  }
  for (const char* bad :
       {"", "580.", ".580", "580..1", "v580", "580.1a", "[N/A]"}) {
    INFO(bad);
    CHECK_FALSE(is_dotted_version(bad));
    CHECK_FALSE(compare_versions(bad, "580").has_value());
  }
}

// The tests' one fake runner answering one result, keeping the last call
// under the names these cases read.
class ScriptedRunner : public test::ScriptedRunner {
 public:
  explicit ScriptedRunner(ProcessResult r)
      : test::ScriptedRunner(std::move(r)) {}
  ProcessResult run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override {
    argv_ = argv;
    timeout_ = timeout;
    return test::ScriptedRunner::run(argv, timeout);
  }
  std::vector<std::string> argv_;
  std::chrono::milliseconds timeout_{0};
};

ProcessResult exited(int code, std::string out) {
  ProcessResult r;
  r.exit_code = code;
  r.out = std::move(out);
  return r;
}

TEST_CASE("nvidia-smi is run with the query argv and the given timeout",
          "[driver]") {
  ScriptedRunner runner(exited(0, h200_csv()));
  SmiAnswer a = query_nvidia_smi(runner, std::chrono::milliseconds(1234));
  REQUIRE(a.outcome == SmiOutcome::kOk);
  CHECK(a.inventory->gpus.size() == 1);
  CHECK(runner.argv_ ==
        std::vector<std::string>{
            "nvidia-smi",
            "--query-gpu=index,name,uuid,memory.total,driver_version,mig.mode."
            "current",
            "--format=csv,noheader"});
  CHECK(runner.timeout_ == std::chrono::milliseconds(1234));
}

TEST_CASE("nvidia-smi's failures are told apart", "[driver]") {
  struct Row {
    std::string name;
    ProcessResult result;
    SmiOutcome outcome;
    std::string quote;
  };
  ProcessResult missing;
  missing.not_found = true;
  ProcessResult hung;
  hung.timed_out = true;
  ProcessResult unstartable;
  unstartable.spawn_error = "Permission denied";
  ProcessResult on_stderr = exited(9, "");
  on_stderr.err =
      "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
      "driver. Make sure that the latest NVIDIA driver is installed and "
      "running.\n";
  const std::vector<Row> rows = {
      {"not on PATH", missing, SmiOutcome::kNotFound, "not on PATH"},
      {"timed out", hung, SmiOutcome::kTimedOut, "did not answer"},
      {"cannot start", unstartable, SmiOutcome::kFailed, "Permission denied"},
      {"no driver",
       exited(9,
              "NVIDIA-SMI has failed because it couldn't communicate with the "
              "NVIDIA driver. Make sure that the latest NVIDIA driver is "
              "installed and running.\n\n"),
       SmiOutcome::kNoCommunication, "couldn't communicate"},
      {"no driver, on stderr", on_stderr, SmiOutcome::kNoCommunication,
       "couldn't communicate"},
      {"no devices", exited(6, "No devices were found\n"),
       SmiOutcome::kNoDevices, "No devices were found"},
      {"library mismatch",
       exited(18,
              "Failed to initialize NVML: Driver/library version mismatch\n"
              "NVML library version: 580.159\n"),
       SmiOutcome::kVersionMismatch, "Driver/library version mismatch"},
      {"other exit", exited(2, "Field \"x\" is not a valid field to query.\n"),
       SmiOutcome::kFailed, "exit code 2"},
      {"garbage", exited(0, "hello\n"), SmiOutcome::kFailed, "line 1"},
  };
  for (const auto& row : rows) {
    INFO(row.name);
    ScriptedRunner runner(row.result);
    SmiAnswer a = query_nvidia_smi(runner, std::chrono::seconds(30));
    CHECK(a.outcome == row.outcome);
    REQUIRE_FALSE(a.inventory.ok());
    CHECK_THAT(a.inventory.error().message, Catch::Contains(row.quote));
  }
}

TEST_CASE("NVML from a library that is not there is 'library missing'",
          "[driver]") {
  NvmlAnswer a = query_nvml("libgpunode-no-such-nvml.so.1");
  CHECK(a.outcome == NvmlOutcome::kLibraryMissing);
  REQUIRE_FALSE(a.inventory.ok());
  CHECK_THAT(a.inventory.error().message,
             Catch::Contains("libgpunode-no-such-nvml.so.1"));
}

TEST_CASE("a library without NVML's symbols is a failure, not a crash",
          "[driver]") {
  NvmlAnswer a = query_nvml("libc.so.6");
  CHECK(a.outcome == NvmlOutcome::kFailed);
  REQUIRE_FALSE(a.inventory.ok());
  CHECK_THAT(a.inventory.error().message, Catch::Contains("nvmlInit_v2"));
}

}  // namespace
}  // namespace gpunode
