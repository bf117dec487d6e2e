// `nvidia-smi -q`: what the driver says of each GPU's health and fabric,
// read where NVML cannot be asked (--root, or a driver whose NVML lacks the
// calls). The sections read are documented in nvidia-smi(1): "Fabric",
// "ECC Errors", "Retired Pages", "Remapped Rows", "Persistence Mode",
// "Minor Number", "Bus Id".
#pragma once

#include <string_view>
#include <vector>

#include "gpunode/gpu.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

// {"nvidia-smi", "-q"}
std::vector<std::string> nvidia_smi_q_argv();

// One GpuHealth per "GPU <bus id>" block, in the order printed. "N/A",
// "[N/A]" and "Not Supported" leave a field empty (the Fabric state "N/A"
// is GpuHealth::Fabric::kNotSupported). Text with no GPU block is an
// ExitCode::kUsage error.
Result<std::vector<GpuHealth>> parse_nvidia_smi_q(std::string_view text);

}  // namespace gpunode
