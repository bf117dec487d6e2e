// The driver stage at "/" (NVML and CUDA asked), with the stand-in
// libraries of test/stubs loaded by path and a host tree as the file
// system: every CUDA verdict, NVML's fabric and health answers, and the
// order in which the parts below the driver are judged.
#include <catch2/catch.hpp>
#include <string>

#include "driver_sim_host.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

using test::any_contains;
using DriverSim = test::DriverSimHost;

const char* kStubVars[] = {
    "GPUNODE_STUB_CUDA_VERSION", "GPUNODE_STUB_CUDA_INIT",
    "GPUNODE_STUB_CUDA_DEVICES", "GPUNODE_STUB_CUDA_NAME",
    "GPUNODE_STUB_CUDA_FAIL",    "GPUNODE_STUB_CUDA_HANG",
    "GPUNODE_STUB_CUDA_CRASH",   "GPUNODE_STUB_CUDA_CORRUPT",
    "GPUNODE_STUB_NVML_INIT",    "GPUNODE_STUB_NVML_GPUS",
    "GPUNODE_STUB_NVML_FABRIC",  "GPUNODE_STUB_NVML_FABRIC_STATUS",
    "GPUNODE_STUB_NVML_ECC",     "GPUNODE_STUB_NVML_REMAP",
    "GPUNODE_STUB_NVML_RETIRED", "GPUNODE_STUB_NVML_PERSISTENCE",
    "GPUNODE_STUB_NVML_OLD",     "GPUNODE_STUB_NVML_ECC_AGGREGATE",
    "GPUNODE_STUB_NVML_ECC_MODE"};

// A host at "/" over `scenario`'s tree: the stand-ins answer as the real
// H200 did (one GPU, CUDA 13.0) until a test says otherwise.
struct LibraryHost : DriverSim {
  explicit LibraryHost(const std::string& scenario = "good-v3")
      : DriverSim(scenario) {
    for (const char* var : kStubVars) env.unset(var);
    env.set("GPUNODE_STUB_CUDA_DEVICES", "1");
    use_libraries();
  }
};

TEST_CASE("CUDA on the host: a working GPU is satisfied and says so",
          "[driver][cuda-check]") {
  LibraryHost sim;
  Check c = sim.check();
  INFO(c.code << ": " << c.summary << " / " << c.fix);
  REQUIRE(c.status == CheckStatus::kSatisfied);
  CHECK_THAT(c.summary,
             Catch::EndsWith("MIG disabled, CUDA 13.0 works (NVML)"));
  CHECK(any_contains(c.details,
                     "CUDA 13.0 (driver API): 1 device(s), a "
                     "context, 1 MiB allocated and copied both "
                     "ways on each"));
  CHECK(any_contains(c.details,
                     "Fabric Manager: not an NVSwitch system (no "
                     "NVSwitch on the PCI bus, GPU fabric state "
                     "N/A)"));
  const auto& cuda = c.facts["cuda"];
  CHECK(cuda["checked"] == true);
  CHECK(cuda["outcome"] == "ok");
  CHECK(cuda["driver_api_version"] == "13.0");
  CHECK(cuda["device_count"] == 1);
  CHECK(cuda["devices"][0]["ok"] == true);
  CHECK(cuda["smoke_image_cuda"] == nullptr);  // no --smoke-image in Options
  CHECK_FALSE(cuda.contains("error"));
  CHECK(c.facts["fabric"]["gpus"][0]["state"] == "not-supported");
  CHECK(c.facts["health"].empty());
  CHECK(sim.tree_unchanged());
}

TEST_CASE("CUDA on the host: each CUDA error is named with its fix",
          "[driver][cuda-check]") {
  struct Case {
    const char* init;
    const char* code;
    const char* name;
    const char* fix;
  };
  for (const Case& k : {
           Case{"802", "driver.cuda-system-not-ready",
                "CUDA_ERROR_SYSTEM_NOT_READY",
                "sudo systemctl enable --now nvidia-fabricmanager"},
           Case{"803", "driver.cuda-mismatch",
                "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "cuda-compat"},
           Case{"804", "driver.cuda-mismatch",
                "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "cuda-compat"},
           Case{"100", "driver.cuda-no-device", "CUDA_ERROR_NO_DEVICE",
                "CUDA_VISIBLE_DEVICES"},
           Case{"999", "driver.cuda-unknown-error", "CUDA_ERROR_UNKNOWN",
                "sudo nvidia-smi -r"},
           Case{"3", "driver.cuda-failed", "CUDA_ERROR_NOT_INITIALIZED",
                "reinstall the NVIDIA driver 580.159.04"},
       }) {
    INFO(k.init);
    LibraryHost sim;
    sim.env.set("GPUNODE_STUB_CUDA_INIT", k.init);
    Check c = sim.check();
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == k.code);
    CHECK(c.exit == ExitCode::kBlocked);
    CHECK_THAT(c.summary, Catch::Contains(std::string("cuInit: ") + k.name +
                                          " (" + k.init + ")"));
    CHECK_THAT(c.fix, Catch::Contains(k.fix));
    CHECK(c.facts["cuda"]["error"]["call"] == "cuInit");
    CHECK(c.facts["cuda"]["error"]["name"] == k.name);
    CHECK(sim.tree_unchanged());
  }
}

TEST_CASE("CUDA on the host: a failure on the second GPU names that GPU",
          "[driver][cuda-check]") {
  LibraryHost sim;
  sim.env.set("GPUNODE_STUB_NVML_GPUS", "2");
  sim.env.set("GPUNODE_STUB_CUDA_DEVICES", "2");
  sim.env.set("GPUNODE_STUB_CUDA_FAIL", "cuMemcpyDtoH_v2:1:214");
  Check c = sim.check();
  CHECK(c.code == "driver.cuda-failed");
  CHECK_THAT(c.summary, Catch::Contains("GPU 1"));
  CHECK_THAT(c.summary, Catch::Contains("CUDA_ERROR_ECC_UNCORRECTABLE (214)"));
  CHECK(c.facts["cuda"]["devices"][0]["ok"] == true);
}

TEST_CASE(
    "CUDA on the host: a GPU busy with workloads is a warning, not a "
    "failure",
    "[driver][cuda-check]") {
  for (const char* fail :
       {"cuDevicePrimaryCtxRetain:0:46", "cuMemAlloc_v2:0:2"}) {
    INFO(fail);
    LibraryHost sim;
    sim.env.set("GPUNODE_STUB_CUDA_FAIL", fail);
    Check c = sim.check();
    CHECK(c.status == CheckStatus::kSatisfied);
    CHECK(any_contains(c.warnings,
                       "the GPU is in use (exclusive compute "
                       "mode, or its memory is full)"));
    CHECK(c.facts["cuda"]["busy"] == true);
    CHECK(c.facts["cuda"]["outcome"] == "failed");
  }
  // The same codes from cuInit are CUDA failing.
  LibraryHost sim;
  sim.env.set("GPUNODE_STUB_CUDA_INIT", "46");
  CHECK(sim.check().code == "driver.cuda-failed");
}

TEST_CASE("CUDA on the host: fewer CUDA devices than GPUs warns",
          "[driver][cuda-check]") {
  LibraryHost sim;
  sim.env.set("GPUNODE_STUB_NVML_GPUS", "2");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(any_contains(c.warnings, "CUDA sees 1 of the 2 GPUs the driver lists"));
}

TEST_CASE("CUDA on the host: a hung call is killed within the run's time",
          "[driver][cuda-check]") {
  LibraryHost sim;
  sim.env.set("GPUNODE_STUB_CUDA_HANG", "cuInit");
  const auto t0 = std::chrono::steady_clock::now();
  Check c = sim.check(std::chrono::milliseconds(400));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(c.code == "driver.cuda-timeout");
  CHECK(c.exit == ExitCode::kTimeout);
  CHECK_THAT(c.summary, Catch::Contains("cuInit did not return within"));
  CHECK(took < std::chrono::seconds(5));
}

TEST_CASE("CUDA on the host: no libcuda.so.1 names the package",
          "[driver][cuda-check]") {
  LibraryHost sim;
  sim.opts.cuda_library = sim.root + "/usr/lib/libcuda.so.1";
  Check c = sim.check();
  CHECK(c.code == "driver.cuda-missing");
  CHECK_THAT(c.fix, Catch::Contains("libnvidia-compute-580"));
  CHECK(c.facts["cuda"]["outcome"] == "library-missing");
}

TEST_CASE("CUDA on the host: a driver too old for the smoke image",
          "[driver][cuda-check]") {
  LibraryHost sim;
  sim.env.set("GPUNODE_STUB_CUDA_VERSION", "12020");
  sim.opts.smoke_image = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0";
  SECTION("with --smoke it blocks") {
    sim.opts.smoke = true;
    Check c = sim.check();
    CHECK(c.code == "driver.cuda-too-old");
    CHECK_THAT(c.summary,
               Catch::Contains("supports CUDA 12.2, but the smoke image "
                               "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-"
                               "cuda12.5.0 needs CUDA 12.5"));
    CHECK(c.facts["cuda"]["smoke_image_cuda"] == "12.5");
  }
  SECTION("without it, a warning") {
    Check c = sim.check();
    CHECK(c.status == CheckStatus::kSatisfied);
    CHECK(any_contains(c.warnings, "needs CUDA 12.5"));
  }
}

TEST_CASE("below the driver: Fabric Manager is judged before CUDA's 802",
          "[driver][cuda-check][fabric]") {
  // An HGX board, NVML's fabric not started, no Fabric Manager: CUDA would
  // answer 802; the cause is named instead, and CUDA is not asked.
  LibraryHost sim("hgx-no-fm");
  sim.env.set("GPUNODE_STUB_NVML_GPUS", "8");
  sim.env.set("GPUNODE_STUB_NVML_FABRIC", "not-started");
  sim.env.set("GPUNODE_STUB_CUDA_INIT", "802");
  Check c = sim.check();
  CHECK(c.code == "driver.fabric-manager-missing");
  CHECK(c.facts["fabric"]["gpus"].size() == 8);
  CHECK(c.facts["fabric"]["gpus"][0]["state"] == "not-started");
  CHECK_FALSE(c.facts.contains("cuda"));
}

TEST_CASE("below the driver: a completed fabric with an error status",
          "[driver][cuda-check][fabric]") {
  LibraryHost sim("hgx");
  sim.env.set("GPUNODE_STUB_NVML_GPUS", "8");
  sim.env.set("GPUNODE_STUB_NVML_FABRIC", "completed");
  sim.env.set("GPUNODE_STUB_NVML_FABRIC_STATUS", "999");
  Check c = sim.check();
  CHECK(c.code == "driver.fabric-incomplete");
  CHECK_THAT(c.summary, Catch::Contains("GPU 0 completed ("));
}

TEST_CASE("health from NVML: ECC errors and persistence off warn",
          "[driver][cuda-check][health]") {
  LibraryHost sim;
  sim.env.set("GPUNODE_STUB_NVML_ECC", "0:3");
  sim.env.set("GPUNODE_STUB_NVML_PERSISTENCE", "off");
  Check c = sim.check();
  REQUIRE(c.status == CheckStatus::kSatisfied);
  CHECK(any_contains(c.warnings,
                     "GPU 0 (00000000:00:06.0) has 3 "
                     "uncorrectable ECC error(s)"));
  CHECK(any_contains(c.warnings,
                     "persistence is off on GPU 0 and "
                     "nvidia-persistenced is not running"));
  CHECK(c.facts["persistence"]["mode_off_gpus"] == nlohmann::json({"0"}));
}

TEST_CASE("NVML's minor numbers say which /dev/nvidia<N> must exist",
          "[driver][cuda-check]") {
  LibraryHost sim;
  sim.env.set("GPUNODE_STUB_NVML_GPUS", "2");
  std::remove((sim.root + "/dev/nvidia1").c_str());
  Check c = sim.check();
  CHECK(c.code == "driver.device-node-missing");
  CHECK_THAT(c.summary, Catch::Contains("/dev/nvidia1 (GPU 1)"));
  CHECK_THAT(c.fix, Catch::StartsWith("sudo nvidia-modprobe -c=1 "));
}

}  // namespace
}  // namespace gpunode
