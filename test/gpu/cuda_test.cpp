// On a real NVIDIA host the CUDA probe must pass every GPU through the real
// libcuda.so.1 (the driver's user part). Without one it is skipped (exit 77),
// never passed.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "gpu/cuda_probe.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

TEST_CASE("the CUDA probe passes every GPU of this machine", "[gpu]") {
  // cuInit on a host with many GPUs can take seconds (and longer with
  // persistence mode off); a minute is what a wedged GPU gets.
  const CudaAnswer a = probe_cuda("libcuda.so.1", std::chrono::seconds(60));
  if (a.outcome == CudaOutcome::kLibraryMissing) {
    GPUNODE_SKIP("no NVIDIA driver: " + a.message);
  }
  INFO(cuda_outcome_name(a.outcome) << ": " << a.message);
  CHECK(a.outcome == CudaOutcome::kOk);
  CHECK(a.driver_api_version >= 11000);
  CHECK(!cuda_version_text(a.driver_api_version).empty());
  REQUIRE(a.device_count > 0);
  CHECK(a.devices.size() == static_cast<std::size_t>(a.device_count));
  for (const CudaDeviceResult& d : a.devices) {
    INFO("GPU " << d.index << " " << d.name);
    CHECK(d.ok);
    CHECK_THAT(d.name, Catch::StartsWith("NVIDIA"));
  }
  WARN("CUDA " << cuda_version_text(a.driver_api_version) << ", "
               << a.device_count << " GPUs, probe took " << a.took.count()
               << " ms");
}

}  // namespace
}  // namespace gpunode
