// On a real NVIDIA host: NVML (through dlopen) and the real nvidia-smi must
// tell the same story, and the driver stage must answer from NVML. Without a
// GPU they are skipped (exit 77, "Skipped" in ctest: skip_test), so CI can run
// them anywhere; the simulated nvidia-smi is kept off PATH so it cannot stand
// in.
#include <limits.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "gpu/nvidia_smi.hpp"
#include "gpu/nvml.hpp"
#include "gpunode/stage.hpp"
#include "gpunode/system_host.hpp"
#include "stages/stages.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

std::string real(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

// PATH without the simulated programs (test/sim/bin), restored at scope
// exit. A test binary started from a shell that sourced the demo, or after a
// unit test that prepended it, would otherwise find the simulation.
class RealPath {
 public:
  RealPath() {
    const char* p = std::getenv("PATH");
    if (p != nullptr) old_ = p;
    const std::string sim = real(std::string(GPUNODE_TEST_SIM));
    std::string kept;
    std::size_t i = 0;
    while (i <= old_.size()) {
      std::size_t j = old_.find(':', i);
      if (j == std::string::npos) j = old_.size();
      const std::string dir = old_.substr(i, j - i);
      if (!dir.empty() && real(dir).rfind(sim, 0) != 0) {
        kept += (kept.empty() ? "" : ":") + dir;
      }
      i = j + 1;
    }
    ::setenv("PATH", kept.c_str(), 1);
  }
  ~RealPath() {
    if (old_.empty()) {
      ::unsetenv("PATH");
    } else {
      ::setenv("PATH", old_.c_str(), 1);
    }
  }
  RealPath(const RealPath&) = delete;
  RealPath& operator=(const RealPath&) = delete;

 private:
  std::string old_;
};

// The real nvidia-smi, or nullopt when there is none (the caller skips).
std::optional<std::string> real_nvidia_smi(ProcessRunner& runner) {
  auto found = runner.which("nvidia-smi");
  if (!found) return std::nullopt;
  if (real(*found).rfind(real(GPUNODE_TEST_SIM), 0) == 0) return std::nullopt;
  return found;
}

TEST_CASE("NVML and nvidia-smi report the same GPUs", "[gpu]") {
  RealPath path;
  auto runner = make_posix_process_runner();
  NvmlAnswer nvml = query_nvml();
  if (nvml.outcome == NvmlOutcome::kLibraryMissing) {
    GPUNODE_SKIP("no NVIDIA GPU (" + nvml.inventory.error().message + ")");
  }
  if (!real_nvidia_smi(*runner)) {
    GPUNODE_SKIP(
        "no NVIDIA GPU (libnvidia-ml.so.1 loads, but no real nvidia-smi on "
        "PATH)");
  }
  SmiAnswer smi = query_nvidia_smi(*runner, std::chrono::seconds(60));
  if (nvml.outcome != NvmlOutcome::kOk) {
    // A library without a working driver: nvidia-smi must fail too.
    INFO("NVML: " << nvml.inventory.error().message);
    CHECK(smi.outcome != SmiOutcome::kOk);
    GPUNODE_SKIP("no usable NVIDIA GPU: NVML says " +
                 nvml.inventory.error().message + "; nvidia-smi says " +
                 (smi.inventory.ok() ? std::string("ok")
                                     : smi.inventory.error().message));
  }
  if (!smi.inventory.ok())
    FAIL("nvidia-smi: " << smi.inventory.error().message);

  const GpuInventory& a = *nvml.inventory;
  const GpuInventory& b = *smi.inventory;
  CHECK(a.source == "NVML");
  CHECK(b.source == "nvidia-smi");
  CHECK(a.driver_version == b.driver_version);
  REQUIRE(a.gpus.size() == b.gpus.size());
  for (std::size_t i = 0; i < a.gpus.size(); ++i) {
    INFO("GPU " << i << ": " << a.gpus[i].name);
    CHECK(a.gpus[i].index == b.gpus[i].index);
    CHECK(a.gpus[i].name == b.gpus[i].name);
    CHECK(a.gpus[i].uuid == b.gpus[i].uuid);
    CHECK(a.gpus[i].mig == b.gpus[i].mig);
    REQUIRE(a.gpus[i].memory_mib.has_value() ==
            b.gpus[i].memory_mib.has_value());
    if (a.gpus[i].memory_mib) {
      const double x = static_cast<double>(*a.gpus[i].memory_mib);
      const double y = static_cast<double>(*b.gpus[i].memory_mib);
      CHECK(std::fabs(x - y) <= 0.01 * std::max(x, y));
    }
  }
  WARN(a.gpus.size() << " GPU(s), driver " << a.driver_version
                     << ", NVML and nvidia-smi agree");
}

TEST_CASE("the driver stage answers from NVML on this machine", "[gpu]") {
  RealPath path;
  NvmlAnswer nvml = query_nvml();
  auto host = make_system_host("/");
  if (nvml.outcome != NvmlOutcome::kOk ||
      !host->fs().stat("/proc/driver/nvidia/version")) {
    GPUNODE_SKIP(
        "no NVIDIA GPU (no working NVML or no "
        "/proc/driver/nvidia/version)");
  }
  Options opts;  // root "/": NVML is asked
  Context ctx(*host, opts,
              host->clock().steady_now() + std::chrono::minutes(1));
  const auto t0 = std::chrono::steady_clock::now();
  Check c = make_driver_stage()->check(ctx);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
  INFO(c.code << ": " << c.summary << " / " << c.fix);
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK_THAT(c.summary, Catch::EndsWith("(NVML)"));
  const auto counted = ctx.gpus();
  REQUIRE(counted.ok());
  CHECK((*counted)->gpus.size() == nvml.inventory->gpus.size());
  WARN(c.summary << " in " << ms << " ms");
}

}  // namespace
}  // namespace gpunode
