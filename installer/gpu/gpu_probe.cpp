#include "gpu/gpu_probe.hpp"

#include <algorithm>
#include <utility>

#include "gpu/driver_version.hpp"
#include "gpu/nvidia_smi.hpp"
#include "gpu/nvidia_smi_q.hpp"
#include "gpu/nvml.hpp"

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

GpuProbe fail(GpuProbe& p, Check c) {
  p.inventory.reset();
  p.failure = std::move(c);
  return std::move(p);
}

Check no_communication(const std::string& said,
                       const std::string& module_label) {
  return blocked(
      "driver.no-communication",
      "the NVIDIA driver does not answer although " + module_label +
          " is loaded (" + said + ")",
      "usually the kernel module and the user-space driver differ after a "
      "driver update: reboot; if it persists, reinstall the NVIDIA driver "
      "from your offline repository and check `dmesg | grep -i NVRM`");
}

// The details' words for a GPU's MIG mode.
std::string mig_text(GpuInfo::Mig mig) {
  return mig == GpuInfo::Mig::kUnsupported
             ? "MIG not supported"
             : std::string("MIG ") + mig_mode_name(mig);
}

// Where NVML cannot be asked, nvidia-smi -q says what it would about each
// GPU's health and fabric (gpu/nvidia_smi_q.hpp). Not being able to read
// it costs only those warnings, never the inventory.
void read_health_from_smi(ProcessRunner& proc, GpuInventory& inv,
                          std::chrono::milliseconds timeout,
                          std::vector<std::string>& details) {
  auto r = proc.run(nvidia_smi_q_argv(), timeout);
  if (!r.succeeded()) {
    details.push_back("nvidia-smi -q: " + describe_failure(r) +
                      "; health and fabric not read");
    return;
  }
  auto parsed = parse_nvidia_smi_q(r.out);
  if (!parsed) {
    details.push_back("nvidia-smi -q: " + parsed.error().message +
                      "; health and fabric not read");
    return;
  }
  // -q lists the GPUs in the order of --query-gpu's index.
  if (parsed->size() != inv.gpus.size()) {
    details.push_back("nvidia-smi -q lists " + std::to_string(parsed->size()) +
                      " GPU(s), the query " + std::to_string(inv.gpus.size()) +
                      "; health and fabric not read");
    return;
  }
  for (std::size_t i = 0; i < parsed->size(); ++i)
    inv.gpus[i].health = (*parsed)[i];
}

}  // namespace

const char* mig_mode_name(GpuInfo::Mig mig) {
  switch (mig) {
    case GpuInfo::Mig::kDisabled:
      return "disabled";
    case GpuInfo::Mig::kEnabled:
      return "enabled";
    case GpuInfo::Mig::kUnsupported:
      return "unsupported";
  }
  return "unknown";
}

namespace {

nlohmann::json count_or_null(const std::optional<std::uint64_t>& count) {
  return count ? nlohmann::json(*count) : nlohmann::json(nullptr);
}

// The ECC counters as read: null where the GPU gave no count (ECC off, or
// unreadable, which a health finding then names).
nlohmann::json ecc_facts(const GpuHealth& h) {
  return {
      {"mode",
       h.ecc_mode_enabled
           ? nlohmann::json(*h.ecc_mode_enabled ? "enabled" : "disabled")
           : nlohmann::json(nullptr)},
      {"volatile_uncorrectable", count_or_null(h.ecc_uncorrectable_volatile)},
      {"aggregate_uncorrectable",
       count_or_null(h.ecc_uncorrectable_aggregate)}};
}

}  // namespace

nlohmann::json inventory_facts(const GpuProbe& probe) {
  nlohmann::json facts = nlohmann::json::object();
  if (!probe.module_version.empty())
    facts["module_version"] = probe.module_version;
  if (!probe.inventory) return facts;
  const GpuInventory& inv = *probe.inventory;
  // GpuInventory::source is worded for people ("NVML"); the fact is a token.
  facts["source"] = inv.source == "NVML" ? "nvml" : inv.source;
  facts["driver_version"] = inv.driver_version;
  facts["gpu_count"] = inv.gpus.size();
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& gpu : inv.gpus) {
    gpus.push_back(
        {{"index", gpu.index},
         {"name", gpu.name},
         {"uuid", gpu.uuid},
         {"memory_mib", gpu.memory_mib ? nlohmann::json(*gpu.memory_mib)
                                       : nlohmann::json(nullptr)},
         {"mig_mode", mig_mode_name(gpu.mig)},
         {"ecc", ecc_facts(gpu.health)}});
  }
  facts["gpus"] = std::move(gpus);
  return facts;
}

Check no_gpus_check(const std::string& said) {
  return blocked("driver.no-gpus",
                 "the NVIDIA driver is loaded but sees no GPU (" + said + ")",
                 "check that the GPU is visible on the bus (lspci -d 10de:), "
                 "is not bound to vfio-pci or passed to a VM, and `dmesg | "
                 "grep -i NVRM` for errors");
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

GpuProbe probe_gpus(Host& host, const Options& opts,
                    std::chrono::milliseconds time_left) {
  GpuProbe p;
  // 1. Is the kernel module loaded? Its /proc file exists only then.
  if (!host.fs().stat(kProcDriverVersion)) {
    return fail(
        p, blocked("driver.module-not-loaded",
                   std::string("the NVIDIA kernel module is not loaded (") +
                       kProcDriverVersion + " does not exist)",
                   kInstallDriverFix));
  }
  auto proc_text = host.fs().read_file(kProcDriverVersion, kProcMaxBytes);
  if (!proc_text) {
    // Only a permission problem is cured by root; a directory or FIFO
    // there is no procfs file at all (a broken --root tree).
    const bool perms = proc_text.error().exit == ExitCode::kCannotRun;
    return fail(
        p,
        blocked("driver.module-unreadable",
                "the NVIDIA kernel module is loaded but " +
                    proc_text.error().message,
                perms ? "run gpunode as root"
                      : std::string("check ") + kProcDriverVersion +
                            " (the kernel's file; with --root, the host tree)",
                perms ? ExitCode::kCannotRun : ExitCode::kUsage));
  }
  std::vector<std::string>& details = p.details;
  std::vector<std::string>& warnings = p.warnings;
  std::string& module_version = p.module_version;
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
  p.module_label = module_version.empty() ? "the kernel module"
                                          : "kernel module " + module_version;

  // 2. Ask NVML; with --root it would describe this machine, not the tree.
  std::optional<GpuInventory>& inventory = p.inventory;
  std::string nvml_reason;
  if (opts.root == "/") {
    NvmlAnswer nvml = query_nvml(opts.nvml_library);
    switch (nvml.outcome) {
      case NvmlOutcome::kOk:
        inventory = std::move(nvml.inventory).value();
        break;
      case NvmlOutcome::kDriverNotLoaded:
        return fail(p,
                    no_communication("NVML: " + nvml.inventory.error().message,
                                     p.module_label));
      case NvmlOutcome::kVersionMismatch:
        return fail(
            p,
            blocked("driver.version-mismatch",
                    "the user-space NVIDIA driver (NVML) does not match " +
                        p.module_label + ": " + nvml.inventory.error().message,
                    "reboot so the kernel loads the module of the installed "
                    "driver (this follows a driver update without a reboot)"));
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
    const auto timeout = std::min(kSmiTimeout, time_left);
    SmiAnswer smi = query_nvidia_smi(host.proc(), timeout);
    const std::string said =
        smi.outcome == SmiOutcome::kOk ? "" : smi.inventory.error().message;
    switch (smi.outcome) {
      case SmiOutcome::kOk:
        inventory = std::move(smi.inventory).value();
        // NVML's health and fabric answers, from the same driver.
        read_health_from_smi(host.proc(), *inventory, timeout, details);
        break;
      case SmiOutcome::kNoCommunication:
        return fail(p, no_communication("nvidia-smi: " + said, p.module_label));
      case SmiOutcome::kNoDevices:
        return fail(p, no_gpus_check("nvidia-smi: " + said));
      case SmiOutcome::kVersionMismatch:
        return fail(
            p,
            blocked("driver.version-mismatch",
                    "the user-space NVIDIA driver does not match " +
                        p.module_label + " (nvidia-smi: " + said + ")",
                    "reboot so the kernel loads the module of the installed "
                    "driver (this follows a driver update without a reboot)"));
      case SmiOutcome::kNotFound:
        return fail(
            p, blocked("driver.no-query",
                       "cannot ask the driver about its GPUs: NVML " +
                           nvml_reason + ", and nvidia-smi is not on PATH",
                       "install the NVIDIA driver's user-space part "
                       "(libnvidia-ml.so.1 and nvidia-smi, same version as " +
                           p.module_label + ") from your offline repository"));
      case SmiOutcome::kTimedOut:
        return fail(
            p, blocked("driver.query-timeout",
                       "the driver did not answer: " + said,
                       "a hung nvidia-smi usually means a stuck GPU or driver: "
                       "check `dmesg | grep -i -e NVRM -e Xid`; a reboot "
                       "usually clears it",
                       ExitCode::kTimeout));
      case SmiOutcome::kFailed:
        return fail(
            p,
            blocked("driver.query-failed", "cannot read the GPU list: " + said,
                    "run nvidia-smi by hand to see the error; check `dmesg | "
                    "grep -i NVRM`"));
    }
  }

  return p;
}

}  // namespace gpunode
