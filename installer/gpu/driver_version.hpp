// NVIDIA driver versions: reading the loaded kernel module's version from
// /proc/driver/nvidia/version, and comparing dotted versions as numbers
// ("580.159.04" vs "550.54.15"), which string order gets wrong.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpunode/result.hpp"

namespace gpunode {

// Where the loaded nvidia.ko describes itself (a host path).
inline constexpr const char* kProcDriverVersion = "/proc/driver/nvidia/version";

// The version on the "NVRM version:" line, in both of its forms:
//   NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  ...
//   NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  ...
// An error (ExitCode::kUsage) when there is no such line or no version on it.
Result<std::string> parse_proc_driver_version(std::string_view text);

// True for "580", "580.65", "580.159.04": digits, separated by single dots.
bool is_dotted_version(std::string_view version);

// Compares two dotted versions component by component as integers, a
// missing component counting as 0: "580.65" < "580.65.06", "580.65" ==
// "580.65.0", "580.159.04" > "550.54.15". Negative, zero or positive like
// strcmp; nullopt when either is not is_dotted_version().
std::optional<int> compare_versions(std::string_view a, std::string_view b);

// The driver branch NVIDIA's package names carry: "580" of "580.159.04"
// (libnvidia-compute-580, nvidia-fabricmanager-580).
std::string driver_branch(std::string_view version);

}  // namespace gpunode
