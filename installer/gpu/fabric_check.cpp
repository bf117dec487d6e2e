// NVSwitch systems (HGX/DGX boards of 4 or 8 GPUs joined by NVSwitches):
// their GPUs cannot run CUDA until NVIDIA Fabric Manager has set up the
// NVLink fabric, and Fabric Manager must be the driver's exact version
// ("NVIDIA Fabric Manager User Guide": "the Fabric Manager version must
// match the driver version"; NVIDIA's apt and yum packaging templates say
// the same). Without it cuInit fails with 802, "system not yet initialized",
// while nvidia-smi looks healthy (NVIDIA/gpu-operator#2781).
#include <string>
#include <vector>

#include "gpu/below_driver.hpp"
#include "gpu/driver_version.hpp"
#include "gpunode/terminal_text.hpp"
#include "gpunode/text.hpp"

namespace gpunode {
namespace {

constexpr const char* kFabricManagerUnit = "nvidia-fabricmanager";
constexpr const char* kFabricManagerBinary = "/usr/bin/nv-fabricmanager";
constexpr auto kCommandTimeout = std::chrono::seconds(10);

const char* fabric_state_name(GpuHealth::Fabric f) {
  switch (f) {
    case GpuHealth::Fabric::kUnknown:
      return "unknown";
    case GpuHealth::Fabric::kNotSupported:
      return "not-supported";
    case GpuHealth::Fabric::kNotStarted:
      return "not-started";
    case GpuHealth::Fabric::kInProgress:
      return "in-progress";
    case GpuHealth::Fabric::kCompleted:
      return "completed";
  }
  return "unknown";
}

bool joins_fabric(GpuHealth::Fabric f) {
  return f == GpuHealth::Fabric::kNotStarted ||
         f == GpuHealth::Fabric::kInProgress ||
         f == GpuHealth::Fabric::kCompleted;
}

// NVSwitches on the PCI bus: NVIDIA's vendor id with the "other bridge"
// class (0x0680), which is how every NVSwitch generation enumerates
// (GPUs are 0x0300 or 0x0302), read from sysfs (Documentation/ABI/testing/
// sysfs-bus-pci). Returns their addresses.
std::vector<std::string> pci_nvswitches(FileSystem& fs) {
  std::vector<std::string> found;
  const std::string dir = "/sys/bus/pci/devices";
  for (const auto& dev : fs.list_dir(dir)) {
    auto vendor = fs.read_file(dir + "/" + dev + "/vendor", 64);
    auto cls = fs.read_file(dir + "/" + dev + "/class", 64);
    if (!vendor || !cls) continue;
    if (trim_space(*vendor) == "0x10de" && cls->rfind("0x0680", 0) == 0)
      found.push_back(dev);
  }
  return found;
}

// /dev/nvidia-nvswitch<N>: made by the nvidia-nvswitch module on systems
// whose switches the host driver manages (HGX A100 and H100/H200).
std::size_t nvswitch_nodes(FileSystem& fs) {
  std::size_t n = 0;
  for (const auto& name : fs.list_dir("/dev")) {
    if (name.rfind("nvidia-nvswitch", 0) == 0 && name != "nvidia-nvswitchctl")
      ++n;
  }
  return n;
}

std::string install_fix(const std::string& driver) {
  const std::string branch = driver_branch(driver);
  return "install Fabric Manager " + driver +
         ", the driver's exact version, from your offline repository "
         "(Debian/Ubuntu: sudo apt-get install nvidia-fabricmanager-" +
         branch + "=" + driver +
         "-1; RHEL: sudo dnf install "
         "nvidia-fabricmanager-" +
         branch + "-" + driver + "-1), then sudo systemctl enable --now " +
         kFabricManagerUnit;
}

// "Fabric Manager version is : 580.159.04" (nv-fabricmanager --version).
std::string parse_fm_version(const std::string& text) {
  const std::size_t colon = text.find(':');
  if (text.find("version") == std::string::npos || colon == std::string::npos)
    return "";
  std::string v(trim_space(text.substr(colon + 1)));
  while (!v.empty() && v.front() == ' ') v.erase(v.begin());
  return v.substr(0, v.find_first_of(" \n"));
}

}  // namespace

std::optional<Check> check_fabric(Context& ctx, const GpuInventory& inv,
                                  DriverFindings& out) {
  FileSystem& fs = ctx.host.fs();
  std::vector<std::string> evidence;
  nlohmann::json states = nlohmann::json::array();
  std::vector<std::string> unfinished;
  bool fabric_reported = false;
  for (const auto& gpu : inv.gpus) {
    const auto f = gpu.health.fabric;
    states.push_back({{"gpu", gpu.index},
                      {"state", fabric_state_name(f)},
                      {"status", gpu.health.fabric_status}});
    if (f != GpuHealth::Fabric::kUnknown) fabric_reported = true;
    if (!joins_fabric(f)) continue;
    if (evidence.empty() || evidence.back().rfind("GPU fabric", 0) != 0)
      evidence.push_back("GPU fabric state reported");
    const bool done = f == GpuHealth::Fabric::kCompleted &&
                      (gpu.health.fabric_status.empty() ||
                       gpu.health.fabric_status == "Success");
    if (!done) {
      unfinished.push_back(
          "GPU " + std::to_string(gpu.index) + " " + fabric_state_name(f) +
          (gpu.health.fabric_status.empty() ||
                   gpu.health.fabric_status == "Success"
               ? ""
               : " (" + terminal_safe(gpu.health.fabric_status) + ")"));
    }
  }
  const auto switches = pci_nvswitches(fs);
  if (!switches.empty())
    evidence.push_back(std::to_string(switches.size()) +
                       " NVSwitch(es) on the PCI bus");
  if (const auto n = nvswitch_nodes(fs))
    evidence.push_back(std::to_string(n) + " /dev/nvidia-nvswitch node(s)");

  nlohmann::json facts = {{"nvswitch", !evidence.empty()},
                          {"evidence", evidence},
                          {"gpus", states}};
  if (evidence.empty()) {
    out.facts["fabric"] = facts;
    out.details.push_back(
        std::string("Fabric Manager: not an NVSwitch system (no NVSwitch on "
                    "the PCI bus") +
        (fabric_reported ? ", GPU fabric state N/A" : "") + ")");
    return std::nullopt;
  }
  const std::string system =
      "this is an NVSwitch system (" + join(evidence) + ")";

  // Is Fabric Manager running? systemd answers "active" with exit 0.
  ProcessRunner& proc = ctx.host.proc();
  auto active =
      proc.run({"systemctl", "is-active", kFabricManagerUnit}, kCommandTimeout);
  const std::string state =
      active.not_found ? "unknown"
                       : std::string(trim_space(first_line_of(active.out)));
  // Where NVIDIA's deb and rpm packages install it.
  const bool installed = fs.is_executable_file(kFabricManagerBinary);
  ProcessResult fm;
  if (installed) {
    fm = proc.run({fs.resolve(kFabricManagerBinary), "--version"},
                  kCommandTimeout);
  }
  const std::string fm_version =
      fm.succeeded() ? parse_fm_version(fm.out + fm.err) : "";
  facts["fabric_manager"] = {
      {"service", state},
      {"installed", installed},
      {"version", fm_version.empty() ? nlohmann::json(nullptr)
                                     : nlohmann::json(fm_version)},
      {"driver_version", inv.driver_version}};
  out.facts["fabric"] = facts;

  if (!installed) {
    return blocked("driver.fabric-manager-missing",
                   system +
                       ", and NVIDIA Fabric Manager is not installed: "
                       "CUDA fails with 802 until it runs",
                   install_fix(inv.driver_version));
  }
  if (!fm_version.empty() && !inv.driver_version.empty() &&
      compare_versions(fm_version, inv.driver_version) != 0) {
    return blocked(
        "driver.fabric-manager-version",
        system + ": Fabric Manager " + terminal_safe(fm_version) +
            " does not match driver " + inv.driver_version +
            " (they must be the same version, or it refuses to start)",
        install_fix(inv.driver_version));
  }
  if (state != "active") {
    return blocked(
        "driver.fabric-manager-inactive",
        system + ", and " + kFabricManagerUnit +
            " is not running (systemctl: " +
            terminal_safe(state.empty() ? describe_failure(active) : state) +
            "): CUDA fails with 802 until it does",
        std::string("sudo systemctl enable --now ") + kFabricManagerUnit +
            "; if it fails, see journalctl -u " + kFabricManagerUnit +
            " and /var/log/fabricmanager.log");
  }
  if (!unfinished.empty()) {
    const std::string list = join(unfinished);
    return blocked("driver.fabric-incomplete",
                   system +
                       ": Fabric Manager runs, but the NVLink fabric is "
                       "not set up: " +
                       list,
                   "wait a minute and check again (gpunode status --only "
                   "driver); if it stays, see journalctl -u " +
                       std::string(kFabricManagerUnit) +
                       " and /var/log/fabricmanager.log, then restart it");
  }
  out.details.push_back("Fabric Manager " + fm_version + ": active; " + system +
                        "; fabric complete on every GPU");
  return std::nullopt;
}

}  // namespace gpunode
