// driver: the bottom layer. Does the host see its GPUs? What the GPU probe
// found (gpu/gpu_probe.hpp: the loaded kernel module, then NVML or
// nvidia-smi), judged: GPUs present, versions agree, --min-driver. Changes
// nothing: a driver is installed
// from the offline repository and needs a reboot, which is not gpunode's to do.
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/below_driver.hpp"
#include "gpu/driver_version.hpp"
#include "gpu/gpu_probe.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

// inputs() reads the module's version file; the real one is a few
// hundred bytes.
constexpr std::size_t kProcMaxBytes = 64 * 1024;

std::string memory_text(const GpuInfo& gpu) {
  return gpu.memory_mib ? std::to_string(*gpu.memory_mib) + " MiB"
                        : "unified memory";
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
    // 1-3. The kernel module, then NVML or nvidia-smi (gpu/gpu_probe.cpp).
    const GpuProbe& probe = ctx.gpu_probe();
    if (probe.failure) {
      Check c = with(*probe.failure, probe.details, probe.warnings);
      c.facts.update(inventory_facts(probe));
      return c;
    }
    std::vector<std::string> details = probe.details, warnings = probe.warnings;
    const std::string& module_version = probe.module_version;
    const std::string& module_label = probe.module_label;
    const GpuInventory* inventory = &*probe.inventory;
    for (auto& line : gpu_details(*inventory)) details.push_back(line);
    const std::string source = inventory->source;
    const std::string& version = inventory->driver_version;
    nlohmann::json facts = inventory_facts(probe);
    // Every verdict from here on states what was found as fields too.
    auto finish = [&](Check c, const std::vector<std::string>& d,
                      const std::vector<std::string>& w) {
      c.facts.update(facts);
      return with(std::move(c), d, w);
    };

    // 4. The verdicts that need the inventory.
    if (inventory->gpus.empty()) {
      return finish(no_gpus_check(source + " reports 0 GPUs"), details,
                    warnings);
    }
    if (!module_version.empty() && !version.empty() &&
        !same_version(module_version, version)) {
      return finish(
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
      auto bundle = ctx.bundle();
      if (bundle && *bundle && !(*bundle)->min_driver.empty()) {
        minimum = (*bundle)->min_driver;
      }
    }
    if (minimum) {
      facts["min_driver"] = *minimum;
      const std::string& required = *minimum;
      const std::string found = version.empty() ? module_version : version;
      const auto order = compare_versions(found, required);
      if (!order) {
        return finish(blocked("driver.bad-version",
                              "cannot compare driver '" + found +
                                  "' with --min-driver '" + required +
                                  "': not a dotted version",
                              "give --min-driver as a dotted version, e.g. "
                              "550.54.15",
                              ExitCode::kUsage),
                      details, warnings);
      }
      if (*order < 0) {
        return finish(
            blocked("driver.too-old",
                    "NVIDIA driver " + found + " is older than the required " +
                        required + " (--min-driver)",
                    "install NVIDIA driver " + required +
                        " or newer from your offline repository, "
                        "then reboot"),
            details, warnings);
      }
    }

    // 5. Below the driver's answers (gpu/below_driver.hpp), lowest first:
    // health is only ever a warning, so it is read first and shown with
    // whatever verdict follows.
    DriverFindings below;
    std::string log_note;
    report_health(health_findings(ctx, *inventory, &log_note), below);
    if (!log_note.empty()) below.details.push_back(log_note);
    auto merged = [&] {
      facts.update(below.facts);
      details.insert(details.end(), below.details.begin(), below.details.end());
      warnings.insert(warnings.end(), below.warnings.begin(),
                      below.warnings.end());
    };
    for (auto part : {check_device_nodes, check_fabric, check_cuda}) {
      if (auto c = part(ctx, *inventory, below)) {
        merged();
        return finish(std::move(*c), details, warnings);
      }
    }
    merged();
    std::string cuda_text;
    if (facts.contains("cuda") && facts["cuda"].value("checked", false)) {
      cuda_text = ", CUDA " +
                  facts["cuda"].value("driver_api_version", std::string()) +
                  " works";
    }

    // 6. Satisfied. MIG is worth a warning: the platform's manifests do not
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
    return finish(satisfied("driver.ok", gpus_text(inventory->gpus) +
                                             ", driver " + version + ", " +
                                             mig_summary(inventory->gpus) +
                                             cuda_text + " (" + source + ")"),
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
};

}  // namespace

std::unique_ptr<Stage> make_driver_stage() {
  return std::make_unique<DriverStage>();
}

}  // namespace gpunode
