// A GPU's health and NVLink fabric, read from NVML in the session that
// nvml.cpp opened. Every call used here is optional: a driver older than
// the call has no symbol for it (or answers NVML_ERROR_FUNCTION_NOT_FOUND),
// and a GPU without the feature answers NVML_ERROR_NOT_SUPPORTED. Both
// leave the field empty; neither fails the inventory.
#pragma once

#include "gpu/nvml_abi.hpp"
#include "gpu/shared_library.hpp"
#include "gpunode/gpu.hpp"

namespace gpunode {

// `nvml` is initialised (nvmlInit_v2 succeeded) and `device` is a handle
// from nvmlDeviceGetHandleByIndex_v2.
GpuHealth read_nvml_health(const SharedLibrary& nvml, NvmlDevice device);

}  // namespace gpunode
