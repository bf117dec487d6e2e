// Asking the host about its GPUs: the loaded kernel module
// (/proc/driver/nvidia/version), then NVML or, where NVML cannot be asked,
// nvidia-smi. The driver stage judges what this finds; any other step that
// needs the GPU count reads it through Context::gpus(), never by running
// the driver stage.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/gpu.hpp"
#include "gpunode/stage.hpp"

namespace gpunode {

struct GpuProbe {
  // The GPUs, when the driver could be asked (may list none).
  std::optional<GpuInventory> inventory;
  // Without an inventory: why, as the driver layer's blocked check.
  std::optional<Check> failure;
  std::string module_version;  // from /proc; empty when it did not parse
  std::string module_label;    // "kernel module 580.1" / "the kernel module"
  std::vector<std::string> details;   // what was asked and answered
  std::vector<std::string> warnings;  // not blocking
};

// nvidia-smi gets at most `time_left` (and never more than 30 s).
GpuProbe probe_gpus(Host& host, const Options& opts,
                    std::chrono::milliseconds time_left);

// The GPU lines of the driver stage's details.
std::vector<std::string> gpu_details(const GpuInventory& inv);

// The driver stage's facts of what was found (docs/json-events.md, driver):
// driver_version, module_version, source ("nvml" | "nvidia-smi"),
// gpu_count, gpus [{index, name, uuid, memory_mib, mig_mode}].
nlohmann::json inventory_facts(const GpuProbe& probe);

// "enabled", "disabled" or "unsupported": a GPU's mig_mode fact.
const char* mig_mode_name(GpuInfo::Mig mig);

// The driver layer's check for a driver that sees no GPU.
Check no_gpus_check(const std::string& said);

}  // namespace gpunode
