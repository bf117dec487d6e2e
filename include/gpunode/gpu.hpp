// What the driver layer knows about the GPUs of this host.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpunode {

struct GpuInfo {
  int index = 0;
  std::string name;
  std::string uuid;
  // Empty on unified-memory GPUs, where NVML answers "Not Supported".
  std::optional<std::uint64_t> memory_mib;
  enum class Mig { kDisabled, kEnabled, kUnsupported } mig = Mig::kUnsupported;
};

struct GpuInventory {
  std::string source;  // "NVML" or "nvidia-smi"
  std::string driver_version;
  std::vector<GpuInfo> gpus;
};

}  // namespace gpunode
