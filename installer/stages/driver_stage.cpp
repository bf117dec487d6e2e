// driver: the bottom layer. Does the host see its GPUs? The loaded kernel
// module (/proc/driver/nvidia/version), then the GPUs through NVML or, where
// NVML cannot be asked, nvidia-smi. Changes nothing: a driver is installed
// from the offline repository and needs a reboot, which is not gpunode's to do.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/driver_version.hpp"
#include "gpu/nvidia_smi.hpp"
#include "gpu/nvml.hpp"
#include "stages/bundle_facts.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

// The real file is a few hundred bytes; anything near this is not it.
constexpr std::size_t kProcMaxBytes = 64 * 1024;
// nvidia-smi answers in tens of milliseconds; a hung one (a wedged GPU)
// should not eat the whole run's --timeout.
constexpr std::chrono::milliseconds kSmiTimeout = std::chrono::seconds(30);

const char* kInstallDriverFix =
    "sudo modprobe nvidia (if the driver is installed) or install the NVIDIA "
    "driver from your offline repository, then reboot";

std::string memory_text(const GpuInfo& gpu) {
  return gpu.memory_mib ? std::to_string(*gpu.memory_mib) + " MiB"
                        : "unified memory";
}

const char* mig_text(GpuInfo::Mig mig) {
  switch (mig) {
    case GpuInfo::Mig::kDisabled:
      return "MIG disabled";
    case GpuInfo::Mig::kEnabled:
      return "MIG enabled";
    case GpuInfo::Mig::kUnsupported:
      return "MIG not supported";
  }
  return "MIG unknown";
}

// "1 GPU: NVIDIA H200 (143771 MiB)" or "8 GPUs: 8x NVIDIA H200 (143771 MiB)";
// identical models are grouped, in the order they first appear.
std::string gpus_text(const std::vector<GpuInfo>& gpus) {
  std::vector<std::pair<std::string, int>> groups;
  for (const auto& gpu : gpus) {
    std::string model = gpu.name + " (" + memory_text(gpu) + ")";
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == model; });
    if (it == groups.end()) {
      groups.emplace_back(std::move(model), 1);
    } else {
      ++it->second;
    }
  }
  std::string out =
      std::to_string(gpus.size()) + (gpus.size() == 1 ? " GPU: " : " GPUs: ");
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i > 0) out += ", ";
    if (gpus.size() > 1) out += std::to_string(groups[i].second) + "x ";
    out += groups[i].first;
  }
  return out;
}

std::string mig_summary(const std::vector<GpuInfo>& gpus) {
  std::size_t enabled = 0, unsupported = 0;
  for (const auto& gpu : gpus) {
    if (gpu.mig == GpuInfo::Mig::kEnabled) ++enabled;
    if (gpu.mig == GpuInfo::Mig::kUnsupported) ++unsupported;
  }
  if (enabled == gpus.size()) return "MIG enabled";
  if (enabled > 0) {
    return "MIG enabled on " + std::to_string(enabled) + " of " +
           std::to_string(gpus.size());
  }
  if (unsupported == gpus.size()) return "MIG not supported";
  return "MIG disabled";
}

std::vector<std::string> gpu_details(const GpuInventory& inv) {
  std::vector<std::string> out;
  for (const auto& gpu : inv.gpus) {
    out.push_back("GPU " + std::to_string(gpu.index) + ": " + gpu.name + ", " +
                  gpu.uuid + ", " +
                  (gpu.memory_mib ? std::to_string(*gpu.memory_mib) + " MiB"
                                  : "memory not reported (unified memory)") +
                  ", " + mig_text(gpu.mig));
  }
  return out;
}

bool same_version(const std::string& a, const std::string& b) {
  if (auto c = compare_versions(a, b)) return *c == 0;
  return a == b;
}

class DriverStage : public Stage {
 public:
  std::string_view name() const override { return "driver"; }
  std::string_view layer() const override { return "NVIDIA driver"; }

  std::string inputs(Context& ctx) const override {
    std::string text = "root=" + ctx.opts.root + "\n";
    text += "min_driver=" + ctx.opts.min_driver.value_or("") + "\n";
    auto proc = ctx.host.fs().read_file(kProcDriverVersion, kProcMaxBytes);
    text +=
        "proc_driver_version=" + (proc ? *proc : std::string("(unreadable)\n"));
    return text;
  }

  Check check(Context& ctx) override {
    // 1. Is the kernel module loaded? Its /proc file exists only then.
    if (!ctx.host.fs().stat(kProcDriverVersion)) {
      return blocked("driver.module-not-loaded",
                     std::string("the NVIDIA kernel module is not loaded (") +
                         kProcDriverVersion + " does not exist)",
                     kInstallDriverFix);
    }
    auto proc_text = ctx.host.fs().read_file(kProcDriverVersion, kProcMaxBytes);
    if (!proc_text) {
      // Only a permission problem is cured by root; a directory or FIFO
      // there is no procfs file at all (a broken --root tree).
      const bool perms = proc_text.error().exit == ExitCode::kCannotRun;
      return blocked(
          "driver.module-unreadable",
          "the NVIDIA kernel module is loaded but " + proc_text.error().message,
          perms ? "run gpunode as root"
                : std::string("check ") + kProcDriverVersion +
                      " (the kernel's file; with --root, the host tree)",
          perms ? ExitCode::kCannotRun : ExitCode::kUsage);
    }
    std::vector<std::string> details, warnings;
    std::string module_version;
    if (auto v = parse_proc_driver_version(*proc_text)) {
      module_version = *v;
      details.push_back("kernel module: NVIDIA " + module_version + " (" +
                        kProcDriverVersion + ")");
    } else {
      // An unfamiliar format is no reason to refuse: NVML/nvidia-smi still
      // answer; only the agreement check below is lost.
      warnings.push_back(v.error().message +
                         "; kernel module and user-space driver versions "
                         "not compared");
    }
    const std::string module_label = module_version.empty()
                                         ? "the kernel module"
                                         : "kernel module " + module_version;

    // 2. Ask NVML; with --root it would describe this machine, not the tree.
    std::optional<GpuInventory> inventory;
    std::string nvml_reason;
    if (ctx.opts.root == "/") {
      NvmlAnswer nvml = query_nvml();
      switch (nvml.outcome) {
        case NvmlOutcome::kOk:
          inventory = std::move(nvml.inventory).value();
          break;
        case NvmlOutcome::kDriverNotLoaded:
          return with(
              no_communication("NVML: " + nvml.inventory.error().message,
                               module_label),
              details, warnings);
        case NvmlOutcome::kVersionMismatch:
          return with(
              blocked("driver.version-mismatch",
                      "the user-space NVIDIA driver (NVML) does not match " +
                          module_label + ": " + nvml.inventory.error().message,
                      "reboot so the kernel loads the module of the installed "
                      "driver (this follows a driver update without a reboot)"),
              details, warnings);
        case NvmlOutcome::kLibraryMissing:
        case NvmlOutcome::kFailed:
          nvml_reason = nvml.inventory.error().message;
          break;
      }
    } else {
      nvml_reason =
          "not used with --root (it would describe this machine, "
          "not the tree)";
    }

    // 3. Fall back to nvidia-smi.
    if (!inventory) {
      details.push_back("NVML: " + nvml_reason + "; asked nvidia-smi");
      const auto timeout = std::min(kSmiTimeout, ctx.time_left());
      SmiAnswer smi = query_nvidia_smi(ctx.host.proc(), timeout);
      const std::string said =
          smi.outcome == SmiOutcome::kOk ? "" : smi.inventory.error().message;
      switch (smi.outcome) {
        case SmiOutcome::kOk:
          inventory = std::move(smi.inventory).value();
          break;
        case SmiOutcome::kNoCommunication:
          return with(no_communication("nvidia-smi: " + said, module_label),
                      details, warnings);
        case SmiOutcome::kNoDevices:
          return with(no_gpus("nvidia-smi: " + said), details, warnings);
        case SmiOutcome::kVersionMismatch:
          return with(
              blocked("driver.version-mismatch",
                      "the user-space NVIDIA driver does not match " +
                          module_label + " (nvidia-smi: " + said + ")",
                      "reboot so the kernel loads the module of the installed "
                      "driver (this follows a driver update without a reboot)"),
              details, warnings);
        case SmiOutcome::kNotFound:
          return with(
              blocked("driver.no-query",
                      "cannot ask the driver about its GPUs: NVML " +
                          nvml_reason + ", and nvidia-smi is not on PATH",
                      "install the NVIDIA driver's user-space part "
                      "(libnvidia-ml.so.1 and nvidia-smi, same version as " +
                          module_label + ") from your offline repository"),
              details, warnings);
        case SmiOutcome::kTimedOut:
          return with(
              blocked("driver.query-timeout",
                      "the driver did not answer: " + said,
                      "a hung nvidia-smi usually means a stuck GPU or driver: "
                      "check `dmesg | grep -i -e NVRM -e Xid`; a reboot "
                      "usually clears it",
                      ExitCode::kTimeout),
              details, warnings);
        case SmiOutcome::kFailed:
          return with(
              blocked("driver.query-failed",
                      "cannot read the GPU list: " + said,
                      "run nvidia-smi by hand to see the error; check `dmesg | "
                      "grep -i NVRM`"),
              details, warnings);
      }
    }

    for (auto& line : gpu_details(*inventory)) details.push_back(line);
    ctx.facts.gpus = *inventory;
    const std::string source = inventory->source;
    const std::string& version = inventory->driver_version;

    // 4. The verdicts that need the inventory.
    if (inventory->gpus.empty()) {
      return with(no_gpus(source + " reports 0 GPUs"), details, warnings);
    }
    if (!module_version.empty() && !version.empty() &&
        !same_version(module_version, version)) {
      return with(
          blocked("driver.version-mismatch",
                  std::string(kProcDriverVersion) + " says " + module_label +
                      " is loaded, but " + source + " reports driver " +
                      version,
                  "reboot so the loaded kernel module and the installed "
                  "driver are the same version (with --root: make sure the "
                  "tree is this host's)"),
          details, warnings);
    }
    // --min-driver, else the bundle's minimum (its own failures are the
    // preflight and image stages' to report).
    std::optional<std::string> minimum = ctx.opts.min_driver;
    if (!minimum) {
      auto bundle = verified_bundle(ctx);
      if (bundle && *bundle && !(*bundle)->min_driver.empty()) {
        minimum = (*bundle)->min_driver;
      }
    }
    if (minimum) {
      const std::string& required = *minimum;
      const std::string found = version.empty() ? module_version : version;
      const auto order = compare_versions(found, required);
      if (!order) {
        return with(blocked("driver.bad-version",
                            "cannot compare driver '" + found +
                                "' with --min-driver '" + required +
                                "': not a dotted version",
                            "give --min-driver as a dotted version, e.g. "
                            "550.54.15",
                            ExitCode::kUsage),
                    details, warnings);
      }
      if (*order < 0) {
        return with(
            blocked("driver.too-old",
                    "NVIDIA driver " + found + " is older than the required " +
                        required + " (--min-driver)",
                    "install NVIDIA driver " + required +
                        " or newer from your offline repository, "
                        "then reboot"),
            details, warnings);
      }
    }

    // 5. Satisfied. MIG is worth a warning: the platform's manifests do not
    // expect it.
    std::string mig_gpus;
    for (const auto& gpu : inventory->gpus) {
      if (gpu.mig != GpuInfo::Mig::kEnabled) continue;
      mig_gpus += (mig_gpus.empty() ? "" : ", ") + std::to_string(gpu.index);
    }
    if (!mig_gpus.empty()) {
      warnings.push_back(
          "MIG is enabled on GPU " + mig_gpus +
          ": the platform's device-plugin manifests use migStrategy none, "
          "under which MIG instances are not advertised as nvidia.com/gpu, so "
          "the full-GPU or time-slicing counts on this node may be lower than "
          "expected; disable MIG (sudo nvidia-smi -i <index> -mig 0, then "
          "reset the GPU or reboot) unless you deploy the plugin with a MIG "
          "strategy");
    }
    return with(
        satisfied("driver.ok",
                  gpus_text(inventory->gpus) + ", driver " + version + ", " +
                      mig_summary(inventory->gpus) + " (" + source + ")"),
        details, warnings);
  }

  Result<void> apply(Context&, const Check&) override { return {}; }

 private:
  static Check with(Check c, const std::vector<std::string>& details,
                    const std::vector<std::string>& warnings) {
    c.details.insert(c.details.end(), details.begin(), details.end());
    c.warnings.insert(c.warnings.end(), warnings.begin(), warnings.end());
    return c;
  }

  static Check no_communication(const std::string& said,
                                const std::string& module_label) {
    return blocked(
        "driver.no-communication",
        "the NVIDIA driver does not answer although " + module_label +
            " is loaded (" + said + ")",
        "usually the kernel module and the user-space driver differ after a "
        "driver update: reboot; if it persists, reinstall the NVIDIA driver "
        "from your offline repository and check `dmesg | grep -i NVRM`");
  }

  static Check no_gpus(const std::string& said) {
    return blocked("driver.no-gpus",
                   "the NVIDIA driver is loaded but sees no GPU (" + said + ")",
                   "check that the GPU is visible on the bus (lspci -d 10de:), "
                   "is not bound to vfio-pci or passed to a VM, and `dmesg | "
                   "grep -i NVRM` for errors");
  }
};

}  // namespace

std::unique_ptr<Stage> make_driver_stage() {
  return std::make_unique<DriverStage>();
}

}  // namespace gpunode
