// The few declarations of nvml.h that gpunode uses, shared by the NVML
// inventory (nvml.cpp) and its health reading (nvml_health.cpp). nvml.h is
// not packaged for Debian's build hosts and would tie us to one driver's
// headers; what is below is part of NVML's stable C ABI.
#pragma once

namespace gpunode {

// nvmlReturn_t is a C enum, passed and returned as an int.
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlNotSupported = 3;
constexpr NvmlReturn kNvmlNoPermission = 4;
constexpr NvmlReturn kNvmlDriverNotLoaded = 9;
constexpr NvmlReturn kNvmlFunctionNotFound = 13;
constexpr NvmlReturn kNvmlLibRmVersionMismatch = 18;

// nvmlDevice_t is an opaque pointer.
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;

}  // namespace gpunode
