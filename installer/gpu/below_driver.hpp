// What must hold under the driver's answers before a container can use a
// GPU: the device nodes, the NVLink fabric of NVSwitch systems (Fabric
// Manager), CUDA itself, and the GPUs' health. NVML answering proves none
// of it (gpu-operator#2781: 802 under a healthy nvidia-smi; #2685: no
// /dev/nvidia-uvm under a passing validator). The driver stage runs these
// parts in this order, lowest first, and reports the first that is broken.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/context.hpp"
#include "gpunode/gpu.hpp"
#include "gpunode/stage.hpp"

namespace gpunode {

// What the parts found, for the driver stage's check: its details and
// warnings, and the facts (docs/json-events.md, driver: device_nodes,
// fabric, cuda, health).
struct DriverFindings {
  std::vector<std::string> details;
  std::vector<std::string> warnings;
  nlohmann::json facts = nlohmann::json::object();
};

// /dev/nvidiactl, /dev/nvidia<minor> for each GPU, /dev/nvidia-uvm (and
// -uvm-tools, a warning), persistence. gpu/device_nodes.cpp.
std::optional<Check> check_device_nodes(Context& ctx, const GpuInventory& inv,
                                        DriverFindings& out);

// NVSwitch systems: Fabric Manager active, its version the driver's, every
// GPU's fabric state complete. Says "not an NVSwitch system" otherwise.
// gpu/fabric_check.cpp.
std::optional<Check> check_fabric(Context& ctx, const GpuInventory& inv,
                                  DriverFindings& out);

// CUDA on the host (gpu/cuda_probe.hpp), judged; and the smoke image's CUDA
// version against the driver's. gpu/cuda_check.cpp.
std::optional<Check> check_cuda(Context& ctx, const GpuInventory& inv,
                                DriverFindings& out);

// A GPU the device plugin will report unhealthy, or that is about to be.
struct HealthFinding {
  int gpu = 0;
  std::string bus_id;
  // "xid" | "ecc" | "ecc-unreadable" | "retired-pages" | "row-remap"
  std::string kind;
  int xid = 0;          // for kind "xid"
  std::string message;  // one phrase naming the GPU
  // The device plugin marks the GPU unhealthy on it (allocatable short).
  bool unhealthy = false;
  std::string reported;  // for kind "ecc-unreadable": what the driver said
  // For kinds "ecc" and "ecc-unreadable": "volatile" (since the driver
  // loaded) or "aggregate" (over the GPU's life).
  std::string counter;
};

// Xid errors since boot (kernel log), uncorrectable ECC errors and pending
// page retirement or row remapping (the inventory's GpuHealth). `note` gets
// why the kernel log could not be read, if it could not. gpu/gpu_health.cpp.
std::vector<HealthFinding> health_findings(Context& ctx,
                                           const GpuInventory& inv,
                                           std::string* note = nullptr);

// The findings as the driver stage's warnings and its `health` fact.
void report_health(const std::vector<HealthFinding>& findings,
                   DriverFindings& out);

}  // namespace gpunode
