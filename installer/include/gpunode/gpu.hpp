// What the driver layer knows about the GPUs of this host.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpunode {

// What the driver says of a GPU's health and of its NVLink fabric (NVML, or
// `nvidia-smi -q` where NVML cannot be asked). Every optional is empty where
// the GPU or the driver does not report it.
struct GpuHealth {
  std::string pci_bus_id;                // "00000000:00:06.0" (NVML's form)
  std::optional<unsigned> minor_number;  // the N of /dev/nvidiaN
  std::optional<bool> persistence_mode;
  // nvmlGpuFabricState_t (nvml.h): kNotSupported where the GPU has no
  // fabric to join (no NVSwitch); kUnknown where it was not asked.
  enum class Fabric {
    kUnknown,
    kNotSupported,
    kNotStarted,
    kInProgress,
    kCompleted
  } fabric = Fabric::kUnknown;
  // The registration's result once the state is kCompleted: "Success", or
  // the error text; empty when not reported.
  std::string fabric_status;
  // Uncorrectable ECC errors since the driver loaded (volatile counter).
  std::optional<std::uint64_t> ecc_uncorrectable_volatile;
  // Set when that count was reported but is no count: what was read
  // ("18446744073709551615", "-3", "0x1F", "Unknown Error", "NVML error
  // 999"). Errors on the GPU are then unknown, not none.
  std::string ecc_unreadable;
  // The same for the aggregate counter (errors over the GPU's life, kept
  // across driver loads and reboots).
  std::optional<std::uint64_t> ecc_uncorrectable_aggregate;
  std::string ecc_aggregate_unreadable;
  // ECC mode as it is now ("Current"); empty when not reported. With it on,
  // a counter that reads N/A or is missing is unreadable, not zero.
  std::optional<bool> ecc_mode_enabled;
  // Pre-Ampere page retirement: a retirement waits for the next reset.
  std::optional<bool> retired_pages_pending;
  // Ampere and later row remapping: pending waits for a reset; failed
  // means the GPU ran out of spare rows.
  std::optional<bool> remapping_pending;
  std::optional<bool> remapping_failed;
};

struct GpuInfo {
  int index = 0;
  std::string name;
  std::string uuid;
  // Empty on unified-memory GPUs, where NVML answers "Not Supported".
  std::optional<std::uint64_t> memory_mib;
  enum class Mig { kDisabled, kEnabled, kUnsupported } mig = Mig::kUnsupported;
  GpuHealth health;
};

struct GpuInventory {
  std::string source;  // "NVML" or "nvidia-smi"
  std::string driver_version;
  std::vector<GpuInfo> gpus;
};

}  // namespace gpunode
