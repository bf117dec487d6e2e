// The CUDA probe against the stand-in libcuda (test/stubs/stub_cuda.c),
// whose every case is chosen by GPUNODE_STUB_CUDA_* at call time.
#include "gpu/cuda_probe.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "gpu/cuda_calls.hpp"
#include "gpunode/interrupt.hpp"
#include "proc_table.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

using std::chrono::milliseconds;

const std::string kStub =
    std::string(GPUNODE_TEST_STUB_DRIVER) + "/libcuda.so.1";
// Far above what the stub needs (a few ms), so only a hang reaches it.
constexpr milliseconds kRoomy{20000};

// The stub's defaults for every case a test does not set.
struct StubEnv : test::ScopedEnv {
  StubEnv() {
    for (const char* v :
         {"GPUNODE_STUB_CUDA_VERSION", "GPUNODE_STUB_CUDA_INIT",
          "GPUNODE_STUB_CUDA_DEVICES", "GPUNODE_STUB_CUDA_NAME",
          "GPUNODE_STUB_CUDA_FAIL", "GPUNODE_STUB_CUDA_HANG",
          "GPUNODE_STUB_CUDA_CRASH", "GPUNODE_STUB_CUDA_CORRUPT",
          "GPUNODE_STUB_CUDA_HOLDER", "GPUNODE_STUB_CUDA_STDOUT"}) {
      unset(v);
    }
  }
};

// This process's children, zombies included: a probe must leave none.
int my_children() {
  int n = 0;
  for (const auto& [pid, e] : test::proc_table()) {
    if (e.ppid == ::getpid()) ++n;
  }
  return n;
}

int open_fds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (d != nullptr && ::readdir(d) != nullptr) ++n;
  if (d != nullptr) ::closedir(d);
  return n;
}

TEST_CASE("the CUDA probe passes every GPU of a working driver", "[cuda]") {
  StubEnv env;
  env.set("GPUNODE_STUB_CUDA_DEVICES", "3");
  env.set("GPUNODE_STUB_CUDA_VERSION", "12090");
  const int fds = open_fds();
  const CudaAnswer a = probe_cuda(kStub, kRoomy);
  CHECK(a.outcome == CudaOutcome::kOk);
  CHECK(std::string(cuda_outcome_name(a.outcome)) == "ok");
  CHECK(a.driver_api_version == 12090);
  CHECK(a.device_count == 3);
  REQUIRE(a.devices.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(a.devices[i].index == i);
    CHECK(a.devices[i].name == "NVIDIA H200 (fake CUDA)");
    CHECK(a.devices[i].ok);
  }
  CHECK(a.failed_call.empty());
  CHECK(a.error_code == 0);
  CHECK(a.message.empty());
  CHECK(a.took < kRoomy);
  CHECK(my_children() == 0);
  CHECK(open_fds() == fds);
}

TEST_CASE("the CUDA probe maps cuInit's CUresult onto its outcome", "[cuda]") {
  struct Case {
    const char* code;
    CudaOutcome outcome;
    const char* message;
  };
  for (const Case& c : {
           Case{"802", CudaOutcome::kSystemNotReady,
                "cuInit: CUDA_ERROR_SYSTEM_NOT_READY (802): system not yet "
                "initialized"},
           Case{"803", CudaOutcome::kDriverMismatch,
                "cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803): system has "
                "unsupported display driver / cuda driver combination"},
           Case{"804", CudaOutcome::kDriverMismatch,
                "cuInit: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE (804): "
                "forward compatibility was attempted on non supported HW"},
           Case{"100", CudaOutcome::kNoDevice,
                "cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device "
                "is detected"},
           Case{"999", CudaOutcome::kUnknown,
                "cuInit: CUDA_ERROR_UNKNOWN (999): unknown error"},
           Case{"46", CudaOutcome::kFailed,
                "cuInit: CUDA_ERROR_DEVICES_UNAVAILABLE (46): CUDA-capable "
                "device(s) is/are busy or unavailable"},
       }) {
    INFO("CUresult " << c.code);
    StubEnv env;
    env.set("GPUNODE_STUB_CUDA_INIT", c.code);
    const CudaAnswer a = probe_cuda(kStub, kRoomy);
    CHECK(a.outcome == c.outcome);
    CHECK(a.message == c.message);
    CHECK(a.failed_call == "cuInit");
    CHECK(std::to_string(a.error_code) == c.code);
    // cuDriverGetVersion comes first and needs no cuInit.
    CHECK(a.driver_api_version == 13000);
    CHECK(a.device_count == -1);
    CHECK(a.devices.empty());
  }
}

TEST_CASE("the CUDA probe stops at the first failing call and names the GPU",
          "[cuda]") {
  StubEnv env;
  SECTION("a context on the second GPU") {
    env.set("GPUNODE_STUB_CUDA_FAIL", "cuDevicePrimaryCtxRetain:1:2");
    const CudaAnswer a = probe_cuda(kStub, kRoomy);
    CHECK(a.outcome == CudaOutcome::kFailed);
    CHECK(a.failed_call == "cuDevicePrimaryCtxRetain (GPU 1)");
    CHECK(a.error_name == "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK(a.error_text == "out of memory");
    CHECK(a.message ==
          "cuDevicePrimaryCtxRetain (GPU 1): CUDA_ERROR_OUT_OF_MEMORY (2): "
          "out of memory");
    REQUIRE(a.devices.size() == 2);
    CHECK(a.devices[0].ok);
    CHECK_FALSE(a.devices[1].ok);
  }
  SECTION("the copy back from the first GPU") {
    env.set("GPUNODE_STUB_CUDA_FAIL", "cuMemcpyDtoH_v2:0:214");
    const CudaAnswer a = probe_cuda(kStub, kRoomy);
    CHECK(a.outcome == CudaOutcome::kFailed);
    CHECK(a.failed_call == "cuMemcpyDtoH (GPU 0)");
    CHECK(a.message ==
          "cuMemcpyDtoH (GPU 0): CUDA_ERROR_ECC_UNCORRECTABLE (214): "
          "uncorrectable ECC error encountered");
    REQUIRE(a.devices.size() == 1);
    CHECK_FALSE(a.devices[0].ok);
  }
  SECTION("a CUresult cuGetErrorName does not know") {
    env.set("GPUNODE_STUB_CUDA_FAIL", "cuMemAlloc_v2:12345");
    const CudaAnswer a = probe_cuda(kStub, kRoomy);
    CHECK(a.outcome == CudaOutcome::kFailed);
    CHECK(a.error_code == 12345);
    CHECK(a.error_name.empty());
    CHECK(a.message == "cuMemAlloc (GPU 0): CUresult (12345)");
  }
  SECTION("the version, before cuInit") {
    env.set("GPUNODE_STUB_CUDA_FAIL", "cuDriverGetVersion:999");
    const CudaAnswer a = probe_cuda(kStub, kRoomy);
    CHECK(a.outcome == CudaOutcome::kUnknown);
    CHECK(a.failed_call == "cuDriverGetVersion");
    CHECK(a.driver_api_version == 0);
  }
  SECTION("the release, last of each GPU") {
    env.set("GPUNODE_STUB_CUDA_FAIL", "cuDevicePrimaryCtxRelease_v2:1:201");
    const CudaAnswer a = probe_cuda(kStub, kRoomy);
    CHECK(a.outcome == CudaOutcome::kFailed);
    CHECK(a.failed_call == "cuDevicePrimaryCtxRelease (GPU 1)");
  }
  CHECK(my_children() == 0);
}

TEST_CASE("the CUDA probe compares the bytes it reads back", "[cuda]") {
  StubEnv env;
  env.set("GPUNODE_STUB_CUDA_CORRUPT", "1");
  const CudaAnswer a = probe_cuda(kStub, kRoomy);
  CHECK(a.outcome == CudaOutcome::kFailed);
  CHECK(a.failed_call == "cuMemcpyDtoH (GPU 0)");
  CHECK(a.error_code == 0);
  CHECK(a.message ==
        "cuMemcpyDtoH (GPU 0): the bytes read back differ from those written");
}

TEST_CASE("the CUDA probe answers no-device for a count of zero", "[cuda]") {
  StubEnv env;
  env.set("GPUNODE_STUB_CUDA_DEVICES", "0");
  const CudaAnswer a = probe_cuda(kStub, kRoomy);
  CHECK(a.outcome == CudaOutcome::kNoDevice);
  CHECK(a.device_count == 0);
  CHECK(a.message == "cuDeviceGetCount: no CUDA device");
}

TEST_CASE(
    "the CUDA probe names a library it cannot load or that lacks "
    "symbols",
    "[cuda]") {
  StubEnv env;
  const CudaAnswer gone = probe_cuda("/nonexistent/libcuda.so.1", kRoomy);
  CHECK(gone.outcome == CudaOutcome::kLibraryMissing);
  CHECK(std::string(cuda_outcome_name(gone.outcome)) == "library-missing");
  CHECK(gone.message ==
        "cannot load /nonexistent/libcuda.so.1: cannot open shared object "
        "file: No such file or directory");
  CHECK(gone.failed_call.empty());

  const std::string lacking =
      std::string(GPUNODE_TEST_STUB_DRIVER_MISSING) + "/libcuda.so.1";
  const CudaAnswer missing = probe_cuda(lacking, kRoomy);
  CHECK(missing.outcome == CudaOutcome::kFailed);
  CHECK(missing.message ==
        lacking + " lacks driver API symbols: cuMemcpyDtoH_v2");
  CHECK(missing.driver_api_version == 0);  // nothing was called
  CHECK(my_children() == 0);
}

TEST_CASE("the CUDA probe kills a call that hangs at the deadline", "[cuda]") {
  StubEnv env;
  const int fds = open_fds();
  SECTION("on a GPU") {
    env.set("GPUNODE_STUB_CUDA_HANG", "cuMemAlloc_v2");
    const CudaAnswer a = probe_cuda(kStub, milliseconds(300));
    CHECK(a.outcome == CudaOutcome::kTimedOut);
    CHECK(std::string(cuda_outcome_name(a.outcome)) == "timed-out");
    CHECK(a.failed_call == "cuMemAlloc (GPU 0)");
    CHECK(a.message == "cuMemAlloc (GPU 0) did not return within 300 ms");
    CHECK(a.took >= milliseconds(300));
    CHECK(a.took < milliseconds(2000));
    REQUIRE(a.devices.size() == 1);
    CHECK_FALSE(a.devices[0].ok);
  }
  SECTION("in cuInit, in whole seconds") {
    env.set("GPUNODE_STUB_CUDA_HANG", "cuInit");
    const CudaAnswer a = probe_cuda(kStub, milliseconds(1000));
    CHECK(a.outcome == CudaOutcome::kTimedOut);
    CHECK(a.message == "cuInit did not return within 1 s");
  }
  CHECK(my_children() == 0);
  CHECK(open_fds() == fds);
}

// True once `pid` is gone (or a zombie: dead, waiting for its reaper),
// waiting up to `within` for SIGKILL to take effect.
bool gone_within(pid_t pid, milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  for (;;) {
    test::ProcEntry e;
    if (!test::read_proc_entry(pid, e) || !e.running()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

TEST_CASE(
    "a libcuda that leaves a process holding the probe's pipe: the probe "
    "ends with its child, and the process does not outlive it",
    "[cuda]") {
  StubEnv env;
  test::TempDir tmp;
  const std::string pid_file = tmp.path() + "/holder.pid";
  env.set("GPUNODE_STUB_CUDA_HOLDER", pid_file);
  const int fds = open_fds();
  // Before the fix the wait ran to this deadline and blamed the teardown.
  const CudaAnswer a = probe_cuda(kStub, milliseconds(3000));
  INFO(a.message);
  CHECK(a.outcome == CudaOutcome::kOk);
  CHECK(a.message.empty());
  CHECK(a.took < milliseconds(1500));
  REQUIRE(a.devices.size() == 2);
  CHECK(a.devices[1].ok);
  const pid_t holder = std::atoi(test::read_text(pid_file).c_str());
  REQUIRE(holder > 0);
  CHECK(gone_within(holder, milliseconds(1000)));
  if (!gone_within(holder, milliseconds(0))) ::kill(holder, SIGKILL);
  CHECK(my_children() == 0);
  CHECK(open_fds() == fds);
}

TEST_CASE(
    "what libcuda prints to stdout never reaches gpunode's stdout (the "
    "--json stream stays JSON lines)",
    "[cuda]") {
  StubEnv env;
  env.set("GPUNODE_STUB_CUDA_STDOUT", "libcuda says hello");
  test::TempDir tmp;
  const std::string captured = tmp.path() + "/stdout";
  // This process's fd 1, as gpunode's would be under --json, into a file.
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  REQUIRE(saved >= 0);
  const int file = ::open(captured.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(file >= 0);
  REQUIRE(::dup2(file, STDOUT_FILENO) == STDOUT_FILENO);
  ::close(file);
  const CudaAnswer a = probe_cuda(kStub, kRoomy);
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  INFO(a.message);
  CHECK(a.outcome == CudaOutcome::kOk);
  CHECK(test::read_text(captured).empty());
  CHECK(my_children() == 0);
}

TEST_CASE("the CUDA probe reports a crash in the call it was in", "[cuda]") {
  StubEnv env;
  env.set("GPUNODE_STUB_CUDA_CRASH", "cuDeviceGetName");
  const CudaAnswer a = probe_cuda(kStub, kRoomy);
  CHECK(a.outcome == CudaOutcome::kCrashed);
  CHECK(std::string(cuda_outcome_name(a.outcome)) == "crashed");
  CHECK(a.failed_call == "cuDeviceGetName (GPU 0)");
  CHECK(a.message == "cuDeviceGetName (GPU 0) crashed (SIGSEGV)");
  CHECK(my_children() == 0);
}

TEST_CASE("an interrupt while the CUDA probe waits kills its child", "[cuda]") {
  StubEnv env;
  env.set("GPUNODE_STUB_CUDA_HANG", "cuInit");
  install_interrupt_handlers();
  std::thread ctrl_c([] {
    std::this_thread::sleep_for(milliseconds(200));
    ::kill(::getpid(), SIGINT);
  });
  const CudaAnswer a = probe_cuda(kStub, kRoomy);
  ctrl_c.join();
  reset_interrupt_for_tests();
  CHECK(a.outcome == CudaOutcome::kFailed);
  CHECK(a.failed_call == "cuInit");
  CHECK(a.message == "interrupted (SIGINT) in cuInit");
  CHECK(a.took < milliseconds(5000));
  CHECK(my_children() == 0);
}

TEST_CASE("the CUDA probe's lines carry any text the library returns",
          "[cuda]") {
  const std::string odd = "a\tb\nc\\d\x1b[2J";
  CHECK(cuda_calls::unescape_field(cuda_calls::escape_field(odd)) == odd);
  CHECK(cuda_calls::escape_field(odd).find_first_of("\t\n") ==
        std::string::npos);
  const auto fields = cuda_calls::split_line(
      "fail\t" + cuda_calls::escape_field(odd) + "\t\t2");
  REQUIRE(fields.size() == 4);
  CHECK(fields[1] == odd);
  CHECK(fields[2].empty());
  CHECK(fields[3] == "2");

  StubEnv env;
  env.set("GPUNODE_STUB_CUDA_NAME", "H200\tX\nY");
  const CudaAnswer a = probe_cuda(kStub, kRoomy);
  CHECK(a.outcome == CudaOutcome::kOk);
  REQUIRE(a.devices.size() == 2);
  CHECK(a.devices[1].name == "H200\tX\nY");
}

TEST_CASE("cuda_version_text reads cuDriverGetVersion's number", "[cuda]") {
  CHECK(cuda_version_text(13000) == "13.0");
  CHECK(cuda_version_text(12040) == "12.4");
  CHECK(cuda_version_text(12090) == "12.9");
  CHECK(cuda_version_text(11080) == "11.8");
  CHECK(cuda_version_text(0).empty());
  CHECK(cuda_version_text(-1).empty());
}

TEST_CASE("every CUDA outcome has its --json token", "[cuda]") {
  CHECK(std::string(cuda_outcome_name(CudaOutcome::kSystemNotReady)) ==
        "system-not-ready");
  CHECK(std::string(cuda_outcome_name(CudaOutcome::kDriverMismatch)) ==
        "driver-mismatch");
  CHECK(std::string(cuda_outcome_name(CudaOutcome::kNoDevice)) == "no-device");
  CHECK(std::string(cuda_outcome_name(CudaOutcome::kUnknown)) == "unknown");
  CHECK(std::string(cuda_outcome_name(CudaOutcome::kFailed)) == "failed");
}

}  // namespace
}  // namespace gpunode
