// Layouts and constants below are nvml.h's, as the NVML API reference
// documents them (docs.nvidia.com/deploy/nvml-api: "Device Queries",
// "Fabric definitions", nvmlGpuFabricInfo_t, nvmlPciInfo_t); NCCL's
// src/include/nvmlwrap.h extracts the same nvmlGpuFabricInfo_t for its own
// dlopen of NVML. The unversioned nvmlDeviceGetGpuFabricInfo (R535 and
// later, kept by later drivers beside the versioned ...InfoV) is used: its
// struct has no version field to get wrong.
#include "gpu/nvml_health.hpp"

#include <cstdint>
#include <optional>
#include <string>

namespace gpunode {
namespace {

// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it.
// NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE (16) and
// NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE (32).
struct NvmlPciInfo {
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_sub_system_id;
  char bus_id[32];
};

// nvmlGpuFabricInfo_t (R535 and later), filled by
// nvmlDeviceGetGpuFabricInfo. nvmlGpuFabricState_t is an unsigned char;
// `status` is meaningful once the state is COMPLETED.
struct NvmlGpuFabricInfo {
  unsigned char cluster_uuid[16];  // NVML_GPU_FABRIC_UUID_LEN
  NvmlReturn status;
  unsigned clique_id;
  unsigned char state;
};
constexpr unsigned char kFabricNotSupported = 0;  // NVML_GPU_FABRIC_STATE_*
constexpr unsigned char kFabricNotStarted = 1;
constexpr unsigned char kFabricInProgress = 2;
constexpr unsigned char kFabricCompleted = 3;

// nvmlEnableState_t's NVML_FEATURE_ENABLED; nvmlMemoryErrorType_t's
// NVML_MEMORY_ERROR_TYPE_UNCORRECTED; nvmlEccCounterType_t's
// NVML_VOLATILE_ECC (counts since the driver loaded) and NVML_AGGREGATE_ECC
// (over the GPU's life).
constexpr unsigned kFeatureEnabled = 1;
constexpr int kMemoryErrorUncorrected = 1;
constexpr int kVolatileEcc = 0;
constexpr int kAggregateEcc = 1;

using ErrorStringFn = const char* (*)(NvmlReturn);
using PciInfoFn = NvmlReturn (*)(NvmlDevice, NvmlPciInfo*);
using UnsignedFn = NvmlReturn (*)(NvmlDevice, unsigned*);
using FabricInfoFn = NvmlReturn (*)(NvmlDevice, NvmlGpuFabricInfo*);
using TotalEccErrorsFn = NvmlReturn (*)(NvmlDevice, int, int,
                                        unsigned long long*);
using EccModeFn = NvmlReturn (*)(NvmlDevice, unsigned*, unsigned*);
using RemappedRowsFn = NvmlReturn (*)(NvmlDevice, unsigned*, unsigned*,
                                      unsigned*, unsigned*);

GpuHealth::Fabric fabric_state(unsigned char state) {
  switch (state) {
    case kFabricNotSupported:
      return GpuHealth::Fabric::kNotSupported;
    case kFabricNotStarted:
      return GpuHealth::Fabric::kNotStarted;
    case kFabricInProgress:
      return GpuHealth::Fabric::kInProgress;
    case kFabricCompleted:
      return GpuHealth::Fabric::kCompleted;
  }
  return GpuHealth::Fabric::kUnknown;  // a state newer than this table
}

// One uncorrectable ECC counter: its count, or what NVML said instead.
void read_ecc_counter(TotalEccErrorsFn fn, NvmlDevice device, int counter,
                      std::optional<bool> ecc_enabled,
                      std::optional<std::uint64_t>& count,
                      std::string& unreadable) {
  unsigned long long value = 0;
  const NvmlReturn rc = fn(device, kMemoryErrorUncorrected, counter, &value);
  // nvml.h's NVML_VALUE_NOT_AVAILABLE_ulonglong: answered, but no count.
  constexpr unsigned long long kNotAvailable = ~0ULL;
  if (rc == kNvmlSuccess && value != kNotAvailable) {
    count = static_cast<std::uint64_t>(value);
  } else if (rc == kNvmlSuccess) {
    unreadable = std::to_string(value);
  } else if (rc == kNvmlFunctionNotFound) {
    // A driver older than the call: nothing asked, nothing to say.
  } else if (rc != kNvmlNotSupported || ecc_enabled == true) {
    // ECC off or a GPU without it answers NOT_SUPPORTED; with ECC on, that
    // or any other error leaves the errors unknown.
    unreadable = "NVML error " + std::to_string(rc);
  }
}

}  // namespace

GpuHealth read_nvml_health(const SharedLibrary& nvml, NvmlDevice device) {
  GpuHealth health;
  // A call that is missing or answers anything but success leaves its
  // field empty: the inventory stands without it.
  if (auto fn = nvml.symbol<PciInfoFn>("nvmlDeviceGetPciInfo_v3")) {
    NvmlPciInfo pci{};
    if (fn(device, &pci) == kNvmlSuccess) {
      pci.bus_id[sizeof pci.bus_id - 1] = '\0';
      health.pci_bus_id = pci.bus_id;
    }
  }
  if (auto fn = nvml.symbol<UnsignedFn>("nvmlDeviceGetMinorNumber")) {
    unsigned minor = 0;
    if (fn(device, &minor) == kNvmlSuccess) health.minor_number = minor;
  }
  if (auto fn = nvml.symbol<UnsignedFn>("nvmlDeviceGetPersistenceMode")) {
    unsigned mode = 0;
    if (fn(device, &mode) == kNvmlSuccess) {
      health.persistence_mode = mode == kFeatureEnabled;
    }
  }
  if (auto fn = nvml.symbol<FabricInfoFn>("nvmlDeviceGetGpuFabricInfo")) {
    NvmlGpuFabricInfo fabric{};
    const NvmlReturn rc = fn(device, &fabric);
    if (rc == kNvmlSuccess) {
      health.fabric = fabric_state(fabric.state);
      if (fabric.state == kFabricCompleted) {
        const auto text = nvml.symbol<ErrorStringFn>("nvmlErrorString");
        const char* said = text != nullptr ? text(fabric.status) : nullptr;
        health.fabric_status =
            said != nullptr ? said
                            : "NVML error " + std::to_string(fabric.status);
      }
    } else if (rc == kNvmlNotSupported) {
      // A GPU older than the call (the NVML reference lists it for Hopper
      // and later). The real H200 PCIe, with no NVSwitch to join, answers
      // success and the state NOT_SUPPORTED instead
      // (test/fixtures/gpu/h200-580.159.04/nvml-health.txt).
      health.fabric = GpuHealth::Fabric::kNotSupported;
    }
  }
  if (auto fn = nvml.symbol<EccModeFn>("nvmlDeviceGetEccMode")) {
    unsigned current = 0, pending = 0;
    if (fn(device, &current, &pending) == kNvmlSuccess) {
      health.ecc_mode_enabled = current == kFeatureEnabled;
    }
  }
  if (auto fn = nvml.symbol<TotalEccErrorsFn>("nvmlDeviceGetTotalEccErrors")) {
    read_ecc_counter(fn, device, kVolatileEcc, health.ecc_mode_enabled,
                     health.ecc_uncorrectable_volatile, health.ecc_unreadable);
    read_ecc_counter(fn, device, kAggregateEcc, health.ecc_mode_enabled,
                     health.ecc_uncorrectable_aggregate,
                     health.ecc_aggregate_unreadable);
  }
  if (auto fn =
          nvml.symbol<UnsignedFn>("nvmlDeviceGetRetiredPagesPendingStatus")) {
    unsigned pending = 0;
    if (fn(device, &pending) == kNvmlSuccess) {
      health.retired_pages_pending = pending == kFeatureEnabled;
    }
  }
  if (auto fn = nvml.symbol<RemappedRowsFn>("nvmlDeviceGetRemappedRows")) {
    unsigned corrected = 0, uncorrected = 0, pending = 0, failed = 0;
    if (fn(device, &corrected, &uncorrected, &pending, &failed) ==
        kNvmlSuccess) {
      health.remapping_pending = pending != 0;
      health.remapping_failed = failed != 0;
    }
  }
  return health;
}

}  // namespace gpunode
