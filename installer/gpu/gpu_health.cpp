// GPUs the device plugin reports unhealthy, or soon will. The plugin
// (k8s-device-plugin v0.19.3, internal/rm/health.go) watches NVML's Xid
// critical-error events and marks a GPU unhealthy on every Xid except the
// application errors 13, 31, 43, 45, 68 and 109; allocatable then drops by
// that GPU's slots with no word from any layer above. Uncorrectable ECC
// errors and pending retirement or remapping are the memory side of the
// same story (NVIDIA, "GPU Memory Error Management"): the page or row is
// fenced off only at the next GPU reset.
#include <map>
#include <string>
#include <utility>

#include "gpu/below_driver.hpp"
#include "gpu/kernel_log.hpp"
#include "gpunode/terminal_text.hpp"

namespace gpunode {
namespace {

constexpr auto kKernelLogTimeout = std::chrono::seconds(10);

bool application_xid(int code) {
  for (int c : {13, 31, 43, 45, 68, 109})
    if (c == code) return true;
  return false;
}

std::string gpu_label(const GpuInfo& gpu) {
  return "GPU " + std::to_string(gpu.index) +
         (gpu.health.pci_bus_id.empty() ? ""
                                        : " (" + gpu.health.pci_bus_id + ")");
}

}  // namespace

std::vector<HealthFinding> health_findings(Context& ctx,
                                           const GpuInventory& inv,
                                           std::string* note) {
  std::vector<HealthFinding> out;
  for (const auto& gpu : inv.gpus) {
    const GpuHealth& h = gpu.health;
    auto add = [&](const char* kind, std::string message) {
      out.push_back(HealthFinding{gpu.index, h.pci_bus_id, kind, 0,
                                  gpu_label(gpu) + " " + std::move(message),
                                  false, "", ""});
    };
    auto add_ecc = [&](const char* counter, const char* since,
                       const std::optional<std::uint64_t>& count,
                       const std::string& unreadable) {
      if (count && *count > 0) {
        add("ecc", "has " + std::to_string(*count) +
                       " uncorrectable ECC error(s) " + since + " (" + counter +
                       " counter)");
        out.back().counter = counter;
      }
      if (!unreadable.empty()) {
        add("ecc-unreadable",
            std::string(counter) +
                " uncorrectable ECC error count could not be read (the "
                "driver reported '" +
                terminal_safe(unreadable) + "'): errors on it are unknown, " +
                "not none");
        out.back().reported = unreadable;
        out.back().counter = counter;
      }
    };
    add_ecc("volatile", "since the driver loaded", h.ecc_uncorrectable_volatile,
            h.ecc_unreadable);
    add_ecc("aggregate", "over its life", h.ecc_uncorrectable_aggregate,
            h.ecc_aggregate_unreadable);
    if (h.retired_pages_pending == true)
      add("retired-pages",
          "has memory pages waiting to be retired at the next GPU reset");
    if (h.remapping_failed == true)
      add("row-remap",
          "ran out of spare memory rows (row remapping failed): have it "
          "replaced");
    else if (h.remapping_pending == true)
      add("row-remap",
          "has memory rows waiting to be remapped at the next "
          "GPU reset");
  }

  // Xid errors since boot, one finding per GPU and code.
  auto log = ctx.host.proc().run(kernel_log_argv(), kKernelLogTimeout);
  if (!log.succeeded()) {
    if (note != nullptr)
      *note = "kernel log not read (" + kernel_log_argv().front() + ": " +
              describe_failure(log) + "), Xid errors not checked";
    return out;
  }
  std::map<std::pair<int, int>, std::pair<int, std::string>> seen;
  std::map<std::pair<int, int>, std::string> where;
  for (const auto& x : parse_xid_events(log.out)) {
    int index = -1;
    for (const auto& gpu : inv.gpus) {
      if (!gpu.health.pci_bus_id.empty() &&
          xid_names_gpu(x.pci, gpu.health.pci_bus_id)) {
        index = gpu.index;
      }
    }
    // One GPU and no bus id to compare: the Xid can only be its.
    if (index < 0 && inv.gpus.size() == 1 &&
        inv.gpus.front().health.pci_bus_id.empty())
      index = inv.gpus.front().index;
    auto& entry = seen[{index, x.code}];
    if (entry.first++ == 0) entry.second = x.text;
    where[{index, x.code}] = x.pci;
  }
  for (const auto& [key, value] : seen) {
    const auto [index, code] = key;
    const GpuInfo* gpu = nullptr;
    for (const auto& g : inv.gpus)
      if (g.index == index) gpu = &g;
    const char* meaning = xid_meaning(code);
    const std::string who = gpu != nullptr
                                ? gpu_label(*gpu)
                                : "the GPU at PCI " + terminal_safe(where[key]);
    out.push_back(HealthFinding{
        index, gpu != nullptr ? gpu->health.pci_bus_id : where[key], "xid",
        code,
        who + " had Xid " + std::to_string(code) +
            (meaning != nullptr ? std::string(" (") + meaning + ")" : "") +
            (value.first > 1 ? " " + std::to_string(value.first) + " times"
                             : "") +
            " since boot: " + terminal_safe(value.second),
        !application_xid(code), "", ""});
  }
  return out;
}

void report_health(const std::vector<HealthFinding>& findings,
                   DriverFindings& out) {
  nlohmann::json facts = nlohmann::json::array();
  for (const auto& f : findings) {
    nlohmann::json item = {
        {"gpu", f.gpu >= 0 ? nlohmann::json(f.gpu) : nlohmann::json(nullptr)},
        {"bus_id", f.bus_id},
        {"kind", f.kind},
        {"message", f.message},
        {"unhealthy", f.unhealthy}};
    if (f.kind == "xid") item["xid"] = f.xid;
    if (f.kind == "ecc-unreadable") item["reported"] = f.reported;
    if (!f.counter.empty()) item["counter"] = f.counter;
    facts.push_back(std::move(item));
    const std::string reset =
        "sudo nvidia-smi -r -i " +
        (f.gpu >= 0 ? std::to_string(f.gpu) : std::string("<index>"));
    std::string fix;
    if (f.kind == "xid") {
      fix = f.unhealthy
                ? "; the device plugin marks the GPU unhealthy on such an "
                  "Xid, and the node then advertises fewer slots: drain it "
                  "and reset the GPU (" +
                      reset +
                      ") or reboot; see "
                      "NVIDIA's XID Errors guide"
                : "; an application error: the GPU stays in service";
    } else if (f.kind == "ecc") {
      fix =
          "; such errors raise Xid 48, 94 or 95, on which the device "
          "plugin marks the GPU unhealthy";
    } else if (f.kind == "ecc-unreadable") {
      fix = "; read them with: nvidia-smi -q -d ECC -i " +
            (f.gpu >= 0 ? std::to_string(f.gpu) : std::string("<index>"));
    } else {
      fix = "; drain the node and reset the GPU (" + reset + ") or reboot";
    }
    // The kernel's Xid text ends in its own full stop.
    std::string message = f.message;
    while (!message.empty() && message.back() == '.') message.pop_back();
    out.warnings.push_back(message + fix);
  }
  out.facts["health"] = std::move(facts);
}

}  // namespace gpunode
