// Asks NVML (libnvidia-ml.so.1, the library nvidia-smi itself uses) what
// GPUs this host has. The library is opened with dlopen at run time, never
// linked: gpunode must start on a host whose driver is missing or broken,
// since saying so is the whole point of the driver stage.
#pragma once

#include <string>

#include "gpunode/gpu.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

// The soname the driver packages install; the unversioned libnvidia-ml.so
// comes only with development packages.
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

// How an NVML query ended. The caller needs more than ok/error: some
// failures are a verdict on the driver, others only mean "ask nvidia-smi".
enum class NvmlOutcome {
  kOk,               // inventory holds the answer
  kLibraryMissing,   // dlopen failed: no user-space driver library here
  kDriverNotLoaded,  // NVML_ERROR_DRIVER_NOT_LOADED: cannot reach the kernel
                     // module
  kVersionMismatch,  // NVML_ERROR_LIB_RM_VERSION_MISMATCH: library != kernel
                     // module
  kFailed,           // anything else (missing symbol, no permission, ...)
};

const char* nvml_outcome_name(NvmlOutcome outcome);

struct NvmlAnswer {
  NvmlOutcome outcome;
  // The inventory (source "NVML") when outcome is kOk; otherwise an Error
  // (layer "driver") whose message names the NVML call that failed.
  Result<GpuInventory> inventory;
};

// Loads `library`, initialises NVML, reads the driver version and every
// device, and shuts NVML down again. `library` is a parameter only so tests
// can point it at a library that is absent or is not NVML.
NvmlAnswer query_nvml(const std::string& library = kNvmlLibrary);

}  // namespace gpunode
