// `nvidia-smi -q` prints one "GPU <bus id>" block per GPU, each a tree of
// "Key : value" lines indented four spaces per level (nvidia-smi(1),
// "QUERY OUTPUT"; the layout of the real H200 reading in
// test/fixtures/gpu/h200-580.159.04). The parser keeps the path of section
// names above each line and reads only the fields GpuHealth holds.
#include "gpu/nvidia_smi_q.hpp"

#include <cstdint>
#include <string>
#include <utility>

#include "gpunode/text.hpp"

namespace gpunode {
namespace {

constexpr std::size_t kIndent = 4;

// nvidia-smi's words for "no value here" (nvidia-smi(1): a field the GPU
// or the driver does not report reads "N/A"; some read "Not Supported").
bool absent(std::string_view value) {
  return value.empty() || value == "N/A" || value == "[N/A]" ||
         value == "Not Supported" || value == "[Not Supported]";
}

std::optional<bool> yes_no(std::string_view value) {
  if (value == "Yes" || value == "Enabled") return true;
  if (value == "No" || value == "Disabled") return false;
  return std::nullopt;
}

std::optional<std::uint64_t> number(std::string_view value) {
  if (value.empty() || value.size() > 20) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (~std::uint64_t{0} - digit) / 10)
      return std::nullopt;  // past 2^64-1
    n = n * 10 + digit;
  }
  return n;
}

// The Fabric section's "State" (nvidia-smi(1); the values mirror
// nvmlGpuFabricState_t). "N/A" is what a GPU with no fabric prints.
GpuHealth::Fabric fabric_state(std::string_view value) {
  if (absent(value)) return GpuHealth::Fabric::kNotSupported;
  if (value == "Not Started") return GpuHealth::Fabric::kNotStarted;
  if (value == "In Progress") return GpuHealth::Fabric::kInProgress;
  if (value == "Completed") return GpuHealth::Fabric::kCompleted;
  return GpuHealth::Fabric::kUnknown;
}

// One uncorrectable ECC counter (Volatile or Aggregate) of a GPU block,
// kept apart until the block ends: the sum of its lines, what was read
// where a line held no count, and whether a line said "no value".
struct EccSum {
  std::optional<std::uint64_t> sum;
  std::string unreadable;             // a line that was no number
  std::optional<std::string> absent;  // a line that read N/A or nothing
  bool seen = false;
};

struct Block {
  GpuHealth health;
  EccSum volatile_ecc;
  EccSum aggregate_ecc;
};

// The counter's total, or what to report instead. With ECC mode Enabled a
// counter the GPU keeps must read as a number: N/A, nothing or no line at
// all leaves the errors unknown. With ECC off (or its mode unread) N/A is
// the GPU's plain answer.
void settle(const EccSum& counter, std::optional<bool> ecc_enabled,
            std::optional<std::uint64_t>& count, std::string& unreadable) {
  count.reset();
  unreadable = counter.unreadable;
  if (!unreadable.empty()) return;  // a part is no total
  if (ecc_enabled == true) {
    if (!counter.seen) {
      unreadable = "(no line)";
      return;
    }
    if (counter.absent) {
      unreadable = counter.absent->empty() ? "(empty)" : *counter.absent;
      return;
    }
  }
  count = counter.sum;
}

// 2^64-1 is the "no value" sentinel NVML's unsigned long long counters
// carry (nvml.h, NVML_VALUE_NOT_AVAILABLE_ulonglong), never a count.
constexpr std::uint64_t kNotAvailable = ~std::uint64_t{0};

void read_field(Block& block, const std::vector<std::string>& path,
                std::string_view key, std::string_view value) {
  GpuHealth& h = block.health;
  const std::string_view section =
      path.empty() ? std::string_view() : std::string_view(path.front());
  if (path.empty()) {
    if (key == "Persistence Mode" && !absent(value)) {
      h.persistence_mode = yes_no(value);
    } else if (key == "Minor Number" && !absent(value)) {
      if (auto n = number(value); n && *n <= 0xFFFFFFFFu) {
        h.minor_number = static_cast<unsigned>(*n);
      }
    }
    return;
  }
  if (section == "Fabric" && path.size() == 1) {
    if (key == "State") h.fabric = fabric_state(value);
    if (key == "Status" && !absent(value)) h.fabric_status = value;
  } else if (section == "ECC Mode" && path.size() == 1 && key == "Current") {
    if (!absent(value)) h.ecc_mode_enabled = yes_no(value);
  } else if (section == "ECC Errors" && path.size() == 2 &&
             (path[1] == "Volatile" || path[1] == "Aggregate") &&
             key.find("Uncorrectable") != std::string_view::npos) {
    // Volatile counters count since the driver loaded, Aggregate ones over
    // the GPU's life; NVML's total uncorrected count is their sum (SRAM
    // parity, SRAM SEC-DED, DRAM on Hopper). Anything else reported (a
    // sentinel, a negative error code, hex, text) means the count is
    // unknown, not zero.
    EccSum& counter =
        path[1] == "Volatile" ? block.volatile_ecc : block.aggregate_ecc;
    counter.seen = true;
    if (absent(value)) {
      if (!counter.absent) counter.absent = std::string(value);
      return;
    }
    const auto n = number(value);
    if (n && *n != kNotAvailable) {
      counter.sum = counter.sum.value_or(0) + *n;
    } else if (counter.unreadable.empty()) {
      counter.unreadable = std::string(value.substr(0, 40));
    }
  } else if (section == "Retired Pages" && path.size() == 1 &&
             (key == "Pending Page Blacklist" || key == "Pending")) {
    if (!absent(value)) h.retired_pages_pending = yes_no(value);
  } else if (section == "Remapped Rows" && path.size() == 1) {
    if (key == "Pending" && !absent(value)) h.remapping_pending = yes_no(value);
    if (key == "Remapping Failure Occurred" && !absent(value)) {
      h.remapping_failed = yes_no(value);
    }
  }
}

}  // namespace

std::vector<std::string> nvidia_smi_q_argv() { return {"nvidia-smi", "-q"}; }

Result<std::vector<GpuHealth>> parse_nvidia_smi_q(std::string_view text) {
  std::vector<GpuHealth> gpus;
  std::optional<Block> block;
  std::vector<std::string> path;  // sections below the GPU block
  auto finish = [&] {
    if (!block) return;
    GpuHealth& h = block->health;
    settle(block->volatile_ecc, h.ecc_mode_enabled,
           h.ecc_uncorrectable_volatile, h.ecc_unreadable);
    settle(block->aggregate_ecc, h.ecc_mode_enabled,
           h.ecc_uncorrectable_aggregate, h.ecc_aggregate_unreadable);
    gpus.push_back(std::move(block->health));
    block.reset();
  };
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);

    const std::size_t indent = line.find_first_not_of(' ');
    if (indent == std::string_view::npos || trim_space(line).empty()) continue;
    line = trim_space(line);
    const std::size_t colon = line.find(" :");
    if (indent == 0) {
      finish();
      path.clear();
      // "GPU 00000000:00:06.0": the bus id's colons have no space before.
      if (colon == std::string_view::npos && line.substr(0, 4) == "GPU ") {
        block.emplace();
        block->health.pci_bus_id = trim_space(line.substr(4));
      }
      continue;
    }
    if (!block) continue;
    // Level 1 holds the GPU's own fields; deeper levels, its sections.
    const std::size_t level = indent / kIndent;
    if (level == 0 || indent % kIndent != 0) continue;  // not nvidia-smi's
    if (path.size() > level - 1) path.resize(level - 1);
    if (colon == std::string_view::npos) {
      if (path.size() == level - 1) path.emplace_back(line);
      continue;
    }
    if (path.size() != level - 1) continue;  // a field under no section
    read_field(*block, path, trim_space(line.substr(0, colon)),
               trim_space(line.substr(colon + 2)));
  }
  finish();
  if (gpus.empty()) {
    return usage_error(
        "nvidia-smi -q printed no \"GPU <bus id>\" block (is this the output "
        "of nvidia-smi -q?)");
  }
  return gpus;
}

}  // namespace gpunode
