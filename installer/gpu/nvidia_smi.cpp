#include "gpu/nvidia_smi.hpp"

#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/driver_version.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/text.hpp"

namespace gpunode {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// nvidia-smi's ways of saying "this GPU has no such value".
bool not_available(std::string_view s) {
  return s == "[N/A]" || s == "N/A" || s == "[Not Supported]" ||
         s == "Not Supported";
}

// "143771 MiB" (or "143771" under nounits); nullopt inside when the GPU
// reports none; outer nullopt when the text is neither.
std::optional<std::optional<std::uint64_t>> parse_memory(std::string_view s) {
  if (not_available(s)) return std::optional<std::uint64_t>{};
  constexpr std::string_view kUnit = "MiB";
  if (s.size() > kUnit.size() && s.substr(s.size() - kUnit.size()) == kUnit) {
    s = trim_space(s.substr(0, s.size() - kUnit.size()));
  }
  if (!all_digits(s) || s.size() > 18) return std::nullopt;
  return std::optional<std::uint64_t>{std::stoull(std::string(s))};
}

std::optional<GpuInfo::Mig> parse_mig(std::string_view s) {
  if (s == "Disabled") return GpuInfo::Mig::kDisabled;
  if (s == "Enabled") return GpuInfo::Mig::kEnabled;
  if (not_available(s)) return GpuInfo::Mig::kUnsupported;
  return std::nullopt;
}

Error malformed(std::size_t line_no, std::string_view line,
                const std::string& why) {
  // What nvidia-smi printed is quoted for a terminal and for --json: bytes
  // that are not printable ASCII are shown as \xNN.
  std::string quoted;
  for (unsigned char c : line.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f) {
      quoted += static_cast<char>(c);
    } else {
      quoted += "\\x" + hex_lower(&c, 1);
    }
  }
  return Error{ExitCode::kUsage,
               "driver",
               "nvidia-smi --query-gpu output line " + std::to_string(line_no) +
                   " is malformed (" + why + "): '" + quoted + "'",
               {}};
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

SmiAnswer fail(SmiOutcome outcome, std::string message) {
  return SmiAnswer{outcome,
                   Error{ExitCode::kBlocked, "driver", std::move(message), {}}};
}

}  // namespace

std::vector<std::string> nvidia_smi_query_argv() {
  return {"nvidia-smi", std::string("--query-gpu=") + kQueryGpuFields,
          "--format=csv,noheader"};
}

Result<GpuInventory> parse_query_gpu_csv(std::string_view text) {
  constexpr std::size_t kFields = 6;
  GpuInventory inventory;
  inventory.source = "nvidia-smi";
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trim_space(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;

    // No field of these six can hold a comma (names are like "NVIDIA H200"),
    // so a plain split is exact.
    std::vector<std::string_view> f;
    std::size_t i = 0;
    for (;;) {
      std::size_t j = line.find(',', i);
      f.push_back(
          trim_space(line.substr(i, j == std::string_view::npos ? j : j - i)));
      if (j == std::string_view::npos) break;
      i = j + 1;
    }
    if (f.size() < kFields) {
      return malformed(line_no, line,
                       "expected at least " + std::to_string(kFields) +
                           " comma-separated fields, got " +
                           std::to_string(f.size()));
    }
    GpuInfo gpu;
    if (!all_digits(f[0]) || f[0].size() > 6) {
      return malformed(line_no, line,
                       "index '" + std::string(f[0]) + "' is not a number");
    }
    gpu.index = std::stoi(std::string(f[0]));
    if (f[1].empty()) return malformed(line_no, line, "empty name");
    gpu.name = std::string(f[1]);
    if (f[2].empty()) return malformed(line_no, line, "empty uuid");
    gpu.uuid = std::string(f[2]);
    const auto memory = parse_memory(f[3]);
    if (!memory) {
      return malformed(
          line_no, line,
          "memory.total '" + std::string(f[3]) + "' is not a number of MiB");
    }
    gpu.memory_mib = *memory;
    if (!is_dotted_version(f[4])) {
      return malformed(
          line_no, line,
          "driver_version '" + std::string(f[4]) + "' is not a version");
    }
    // One driver serves every GPU; disagreement means the text is not
    // what we asked for.
    if (inventory.gpus.empty()) {
      inventory.driver_version = std::string(f[4]);
    } else if (f[4] != inventory.driver_version) {
      return malformed(line_no, line,
                       "driver_version differs from the first line's " +
                           inventory.driver_version);
    }
    const auto mig = parse_mig(f[5]);
    if (!mig) {
      return malformed(line_no, line,
                       "mig.mode.current '" + std::string(f[5]) +
                           "' is not Enabled, Disabled or [N/A]");
    }
    gpu.mig = *mig;
    inventory.gpus.push_back(std::move(gpu));
  }
  return inventory;
}

const char* smi_outcome_name(SmiOutcome outcome) {
  switch (outcome) {
    case SmiOutcome::kOk:
      return "ok";
    case SmiOutcome::kNotFound:
      return "not found";
    case SmiOutcome::kNoCommunication:
      return "no communication";
    case SmiOutcome::kNoDevices:
      return "no devices";
    case SmiOutcome::kVersionMismatch:
      return "version mismatch";
    case SmiOutcome::kTimedOut:
      return "timed out";
    case SmiOutcome::kFailed:
      return "failed";
  }
  return "unknown";
}

SmiAnswer query_nvidia_smi(ProcessRunner& proc,
                           std::chrono::milliseconds timeout) {
  const ProcessResult r = proc.run(nvidia_smi_query_argv(), timeout);
  if (r.not_found) {
    return fail(SmiOutcome::kNotFound, "nvidia-smi is not on PATH");
  }
  if (r.timed_out) {
    return fail(SmiOutcome::kTimedOut, "nvidia-smi did not answer within " +
                                           std::to_string(timeout.count()) +
                                           " ms (killed)");
  }
  if (!r.spawn_error.empty()) {
    return fail(SmiOutcome::kFailed, "nvidia-smi " + describe_failure(r));
  }
  // nvidia-smi prints these on stdout, but look at both streams: where they
  // go has changed between driver releases.
  const std::string said = r.out + "\n" + r.err;
  const std::string quote = first_line_of(said) + cut_note(r);
  if (contains(said, "couldn't communicate with the NVIDIA driver")) {
    return fail(SmiOutcome::kNoCommunication, quote);
  }
  if (contains(said, "No devices were found")) {
    return fail(SmiOutcome::kNoDevices, quote);
  }
  if (contains(said, "Driver/library version mismatch")) {
    return fail(SmiOutcome::kVersionMismatch, quote);
  }
  if (r.exit_code != 0) {
    return fail(SmiOutcome::kFailed,
                "nvidia-smi failed (" + describe_failure(r) + ")");
  }
  if (r.out_cut) {
    // A GPU's line is about 150 bytes: no real answer comes near the cap.
    return fail(SmiOutcome::kFailed,
                "nvidia-smi printed more than a GPU list can be" + cut_note(r));
  }
  auto parsed = parse_query_gpu_csv(r.out);
  if (!parsed) return SmiAnswer{SmiOutcome::kFailed, parsed.error()};
  return SmiAnswer{SmiOutcome::kOk, std::move(parsed).value()};
}

}  // namespace gpunode
