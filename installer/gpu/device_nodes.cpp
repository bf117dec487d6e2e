// The device nodes a container's GPU needs. The NVIDIA container runtime
// bind-mounts /dev/nvidiactl, /dev/nvidia<minor> and /dev/nvidia-uvm from
// the host (libnvidia-container, "Device nodes"); the kernel module creates
// none of them itself: the driver's udev rules, nvidia-persistenced or
// nvidia-modprobe do (nvidia-modprobe(1): -c MINOR makes /dev/nvidiactl and
// /dev/nvidia<MINOR>, -u loads nvidia-uvm and makes /dev/nvidia-uvm and
// -uvm-tools). nvidia-smi works without /dev/nvidia-uvm, CUDA does not
// (gpu-operator#2685).
#include <algorithm>
#include <string>

#include "gpu/below_driver.hpp"
#include "gpunode/text.hpp"

namespace gpunode {
namespace {

// A device node in the tree. A directory there is not one; anything else
// is taken as one, because a test tree cannot hold character devices
// without privileges and stands in for them with plain files.
bool present(FileSystem& fs, const std::string& path) {
  auto info = fs.stat(path);
  return info && info->type != FileInfo::Type::kDirectory;
}

bool numbered_node(const std::string& name) {
  if (name.size() <= 6 || name.compare(0, 6, "nvidia") != 0) return false;
  return std::all_of(name.begin() + 6, name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// "-c=0 -c=1": nvidia-modprobe's flags for these minors.
std::string minor_flags(const std::vector<unsigned>& minors) {
  std::string out;
  for (unsigned m : minors) out += " -c=" + std::to_string(m);
  return out;
}

// nvidia-persistenced keeps every GPU initialised when no client holds it
// (the driver's "Persistence Daemon" document); its comm is its name.
bool persistenced_running(FileSystem& fs) {
  for (const auto& entry : fs.list_dir("/proc")) {
    if (entry.empty() || !std::all_of(entry.begin(), entry.end(), ::isdigit))
      continue;
    auto comm = fs.read_file("/proc/" + entry + "/comm", 256);
    if (comm && comm->rfind("nvidia-persiste", 0) == 0) return true;
  }
  return false;
}

}  // namespace

std::optional<Check> check_device_nodes(Context& ctx, const GpuInventory& inv,
                                        DriverFindings& out) {
  FileSystem& fs = ctx.host.fs();
  std::vector<std::string> missing;
  std::vector<unsigned> missing_minors;
  // The GPUs' own nodes: by minor number where the driver said it, else
  // at least as many /dev/nvidia<N> as there are GPUs.
  bool all_minors_known = true;
  for (const auto& gpu : inv.gpus) {
    if (!gpu.health.minor_number) {
      all_minors_known = false;
      continue;
    }
    const unsigned minor = *gpu.health.minor_number;
    const std::string path = "/dev/nvidia" + std::to_string(minor);
    if (!present(fs, path)) {
      missing.push_back(path + " (GPU " + std::to_string(gpu.index) + ")");
      missing_minors.push_back(minor);
    }
  }
  std::size_t numbered = 0;
  for (const auto& name : fs.list_dir("/dev")) {
    if (numbered_node(name) && present(fs, "/dev/" + name)) ++numbered;
  }
  if (!all_minors_known && numbered < inv.gpus.size()) {
    missing.push_back(std::to_string(inv.gpus.size() - numbered) + " of " +
                      std::to_string(inv.gpus.size()) + " /dev/nvidia<N>");
    for (unsigned m = 0; m < inv.gpus.size(); ++m) missing_minors.push_back(m);
  }
  const bool ctl = present(fs, "/dev/nvidiactl");
  if (!ctl) missing.insert(missing.begin(), "/dev/nvidiactl");
  const bool uvm = present(fs, "/dev/nvidia-uvm");
  const bool uvm_tools = present(fs, "/dev/nvidia-uvm-tools");
  const bool uvm_loaded = fs.stat("/sys/module/nvidia_uvm").has_value();

  nlohmann::json missing_fact = nlohmann::json::array();
  for (const auto& m : missing) missing_fact.push_back(m);
  if (!uvm) missing_fact.push_back("/dev/nvidia-uvm");
  if (!uvm_tools) missing_fact.push_back("/dev/nvidia-uvm-tools");
  out.facts["device_nodes"] = {{"missing", missing_fact},
                               {"nvidia_uvm_loaded", uvm_loaded}};

  if (!missing.empty()) {
    if (missing_minors.empty()) missing_minors.push_back(0);
    return blocked(
        "driver.device-node-missing",
        "the driver answers, but its device nodes are missing: " +
            join(missing) +
            "; the container runtime mounts them into every GPU container",
        "sudo nvidia-modprobe" + minor_flags(missing_minors) +
            " (creates /dev/nvidiactl and /dev/nvidia<N>); to have them at "
            "every boot, enable nvidia-persistenced or the driver's udev "
            "rules");
  }
  if (!uvm) {
    return blocked(
        "driver.uvm-missing",
        std::string("/dev/nvidia-uvm is missing") +
            (uvm_loaded ? " although the nvidia-uvm module is loaded"
                        : " (the nvidia-uvm kernel module is not loaded)") +
            ": nvidia-smi works, but every CUDA program in a container fails",
        std::string(uvm_loaded ? "" : "sudo modprobe nvidia-uvm && ") +
            "sudo nvidia-modprobe -u -c=0 (creates /dev/nvidia-uvm and "
            "-uvm-tools); to load it at every boot: echo nvidia-uvm | sudo "
            "tee /etc/modules-load.d/nvidia-uvm.conf");
  }
  out.details.push_back(
      "device nodes: /dev/nvidiactl, " +
      (all_minors_known ? std::to_string(inv.gpus.size()) + " GPU node(s)"
                        : std::to_string(numbered) + " /dev/nvidia<N>") +
      ", /dev/nvidia-uvm" + (uvm_tools ? ", /dev/nvidia-uvm-tools" : ""));
  if (!uvm_tools) {
    out.warnings.push_back(
        "/dev/nvidia-uvm-tools is missing: CUDA runs, but profilers and "
        "debuggers in containers (Nsight, cuda-gdb) cannot attach; sudo "
        "nvidia-modprobe -u -c=0 creates it");
  }

  // Persistence: without it the driver tears a GPU down whenever no client
  // holds it, so each container start pays the GPU's initialisation again
  // (seconds on large boards), and NVML's view of it comes and goes.
  std::vector<std::string> off;
  for (const auto& gpu : inv.gpus) {
    if (gpu.health.persistence_mode == false)
      off.push_back(std::to_string(gpu.index));
  }
  const bool daemon = persistenced_running(fs);
  out.facts["persistence"] = {
      {"daemon_running", daemon},
      {"mode_off_gpus", nlohmann::json(off)},
  };
  if (!off.empty() && !daemon) {
    out.warnings.push_back(
        "persistence is off on GPU " + join(off) +
        " and nvidia-persistenced is not running: each container start "
        "initialises the GPU again; sudo systemctl enable --now "
        "nvidia-persistenced");
  }
  return std::nullopt;
}

}  // namespace gpunode
