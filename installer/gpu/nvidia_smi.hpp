// The fallback when NVML cannot be asked directly (no library in gpunode's
// view, or --root pointing at another tree): nvidia-smi's CSV query, plus
// the failure texts nvidia-smi prints when the driver is not usable.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "gpunode/gpu.hpp"
#include "gpunode/host.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

// The fields asked for, in the order parse_query_gpu_csv expects them.
inline constexpr const char* kQueryGpuFields =
    "index,name,uuid,memory.total,driver_version,mig.mode.current";

// The argv query_nvidia_smi runs.
std::vector<std::string> nvidia_smi_query_argv();

// Parses `nvidia-smi --query-gpu=<kQueryGpuFields> --format=csv,noheader`.
// Extra trailing columns are ignored (so output from a longer field list
// parses too); blank lines are skipped; CRLF and padding are tolerated.
// Memory "[N/A]", "[Not Supported]" or "N/A" means none reported (unified
// memory). A malformed line is an ExitCode::kUsage error naming the line.
Result<GpuInventory> parse_query_gpu_csv(std::string_view text);

enum class SmiOutcome {
  kOk,               // inventory holds the answer
  kNotFound,         // nvidia-smi is not on PATH
  kNoCommunication,  // "couldn't communicate with the NVIDIA driver" (exit 9)
  kNoDevices,        // "No devices were found" (exit 6)
  kVersionMismatch,  // "Driver/library version mismatch" (exit 18)
  kTimedOut,         // killed at the deadline
  kFailed,           // any other failure, or output that does not parse
};

const char* smi_outcome_name(SmiOutcome outcome);

struct SmiAnswer {
  SmiOutcome outcome;
  // The inventory (source "nvidia-smi") when outcome is kOk; otherwise an
  // Error (layer "driver") quoting what nvidia-smi said.
  Result<GpuInventory> inventory;
};

// Runs nvidia-smi (found on PATH by `proc`) with nvidia_smi_query_argv().
SmiAnswer query_nvidia_smi(ProcessRunner& proc,
                           std::chrono::milliseconds timeout);

}  // namespace gpunode
