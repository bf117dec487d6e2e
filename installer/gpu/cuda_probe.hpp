// Proves that CUDA works on this host, below any container: the driver API
// (libcuda.so.1, opened with dlopen, never linked) is initialised, counts
// its devices, and on each one creates a context, allocates a little memory
// and copies to and from it. NVML answering proves none of this: on an
// NVSwitch system without Fabric Manager nvidia-smi looks healthy while
// every CUDA call fails with 802 (NVIDIA/gpu-operator#2781).
//
// The probe runs in a forked child, so a hung call (a wedged GPU) is killed
// at the deadline and a crash inside the library cannot take gpunode down.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gpunode {

// How the probe ended, from the CUDA driver API's CUresult (cuda.h).
enum class CudaOutcome {
  kOk,              // every device: context, allocation, copies
  kLibraryMissing,  // dlopen failed: no libcuda.so.1 (driver's user part)
  kSystemNotReady,  // 802 CUDA_ERROR_SYSTEM_NOT_READY: Fabric Manager
  kDriverMismatch,  // 803 CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 804
                    // CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: libcuda
                    // (or a forward-compat libcuda) does not match the
                    // kernel module
  kNoDevice,        // 100 CUDA_ERROR_NO_DEVICE
  kUnknown,         // 999 CUDA_ERROR_UNKNOWN
  kFailed,          // any other CUresult, or a missing symbol
  kTimedOut,        // killed at the deadline; `failed_call` is where it hung
  kCrashed,         // the child died of a signal in `failed_call`
};

// The outcome as a token for --json: "ok", "library-missing",
// "system-not-ready", "driver-mismatch", "no-device", "unknown", "failed",
// "timed-out", "crashed".
const char* cuda_outcome_name(CudaOutcome outcome);

struct CudaDeviceResult {
  int index = 0;
  std::string name;  // cuDeviceGetName
  bool ok = false;   // context, allocation and both copies succeeded
};

struct CudaAnswer {
  CudaOutcome outcome = CudaOutcome::kFailed;
  // cuDriverGetVersion: 13000 for CUDA 13.0; 0 when not read.
  int driver_api_version = 0;
  int device_count = -1;                  // cuDeviceGetCount; -1 when not read
  std::vector<CudaDeviceResult> devices;  // the devices tried, in order
  // The first call that failed, hung or crashed ("cuInit",
  // "cuDevicePrimaryCtxRetain (GPU 1)", "cuMemcpyHtoD (GPU 0)"); empty when
  // kOk.
  std::string failed_call;
  int error_code = 0;      // its CUresult; 0 when none
  std::string error_name;  // cuGetErrorName: "CUDA_ERROR_SYSTEM_NOT_READY"
  std::string error_text;  // cuGetErrorString, as the library words it
  // One phrase for a message: "cuInit: CUDA_ERROR_SYSTEM_NOT_READY (802):
  // system not yet initialized", "cuDevicePrimaryCtxRetain (GPU 1) did not
  // return within 20 s", "cannot load libcuda.so.1: ...". Empty when kOk.
  std::string message;
  std::chrono::milliseconds took{0};
};

// "13.0" for 13000, "12.4" for 12040; "" for 0.
std::string cuda_version_text(int driver_api_version);

// Runs the probe against `library` (a soname, searched as dlopen does, or a
// path) in a child process that gets at most `timeout` in all.
CudaAnswer probe_cuda(const std::string& library,
                      std::chrono::milliseconds timeout);

}  // namespace gpunode
