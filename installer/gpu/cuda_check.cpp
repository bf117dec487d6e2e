// CUDA on the host, judged: the probe (gpu/cuda_probe.hpp) names the call
// that failed; this names the layer's trouble and its fix. CUresult codes
// and their meaning: cuda.h, "CUDA Driver API: Error Handling".
#include <regex>
#include <string>

#include "gpu/below_driver.hpp"
#include "gpu/cuda_probe.hpp"
#include "gpu/driver_version.hpp"

namespace gpunode {
namespace {

// A probe that creates a context on each GPU takes well under a second per
// GPU; a hung driver must not eat the run's --timeout.
constexpr std::chrono::milliseconds kCudaTimeout = std::chrono::seconds(30);

// CUresult values (cuda.h) that mean "busy", not "broken".
constexpr int kOutOfMemory = 2;          // CUDA_ERROR_OUT_OF_MEMORY
constexpr int kDevicesUnavailable = 46;  // CUDA_ERROR_DEVICES_UNAVAILABLE

// The CUDA version the smoke image was built for, as cuDriverGetVersion
// numbers it (12050 for "...:vectoradd-cuda12.5.0"); 0 when the tag does
// not say. The NVIDIA container runtime refuses a container whose
// NVIDIA_REQUIRE_CUDA ("cuda>=12.5", set in NVIDIA's CUDA images) the
// driver cannot meet: "requirement error: unsatisfied condition".
int image_cuda_version(const std::string& image) {
  static const std::regex tag(R"(cuda(\d+)\.(\d+))");
  std::smatch m;
  const std::size_t colon = image.rfind(':');
  const std::string t =
      colon == std::string::npos ? image : image.substr(colon);
  if (!std::regex_search(t, m, tag)) return 0;
  return std::stoi(m[1]) * 1000 + std::stoi(m[2]) * 10;
}

nlohmann::json answer_facts(const CudaAnswer& a) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : a.devices)
    devices.push_back({{"index", d.index}, {"name", d.name}, {"ok", d.ok}});
  nlohmann::json facts = {
      {"checked", true},
      {"outcome", cuda_outcome_name(a.outcome)},
      {"driver_api_version",
       a.driver_api_version
           ? nlohmann::json(cuda_version_text(a.driver_api_version))
           : nlohmann::json(nullptr)},
      {"device_count", a.device_count >= 0 ? nlohmann::json(a.device_count)
                                           : nlohmann::json(nullptr)},
      {"devices", devices},
      {"took_ms", a.took.count()}};
  if (a.outcome != CudaOutcome::kOk) {
    facts["error"] = {{"call", a.failed_call},
                      {"code", a.error_code},
                      {"name", a.error_name},
                      {"message", a.message}};
  }
  return facts;
}

Check verdict(const CudaAnswer& a, const GpuInventory& inv) {
  const std::string said = "CUDA on the host fails: " + a.message;
  const std::string driver = inv.driver_version;
  switch (a.outcome) {
    case CudaOutcome::kOk:
      break;
    case CudaOutcome::kLibraryMissing:
      return blocked(
          "driver.cuda-missing",
          "the driver's CUDA library cannot be loaded (" + a.message +
              "): the container runtime mounts it into every GPU container",
          "install the NVIDIA driver's CUDA library, version " + driver +
              ", from your offline repository (Ubuntu: libnvidia-compute-" +
              driver_branch(driver) +
              "; Debian: libcuda1; RHEL: nvidia-driver-cuda-libs)");
    case CudaOutcome::kSystemNotReady:
      return blocked(
          "driver.cuda-system-not-ready",
          said +
              " (the NVLink fabric is not ready: on an NVSwitch system "
              "CUDA waits for NVIDIA Fabric Manager)",
          "sudo systemctl enable --now nvidia-fabricmanager; it must be "
          "Fabric Manager " +
              driver +
              " exactly (gpunode status --only driver says what it finds)");
    case CudaOutcome::kDriverMismatch:
      return blocked(
          "driver.cuda-mismatch",
          said + " (the CUDA library does not match the kernel module)",
          "a CUDA forward-compatibility library (cuda-compat, "
          "/usr/local/cuda/compat) on the library path, or a driver update "
          "without a reboot: remove the compat library from ld.so.conf, or "
          "reboot");
    case CudaOutcome::kNoDevice:
      return blocked(
          "driver.cuda-no-device",
          said + " although the driver lists " +
              std::to_string(inv.gpus.size()) + " GPU(s)",
          "check CUDA_VISIBLE_DEVICES in gpunode's environment and the "
          "permissions of /dev/nvidia*; `dmesg | grep -i NVRM`");
    case CudaOutcome::kUnknown:
      return blocked(
          "driver.cuda-unknown-error",
          said +
              " (an unknown error: usually a GPU in a bad state after an "
              "Xid, or a driver left half-loaded)",
          "dmesg | grep -i -e NVRM -e Xid; reset the GPU (sudo nvidia-smi -r "
          "-i <index>, nothing may use it) or reboot");
    case CudaOutcome::kTimedOut:
      return blocked("driver.cuda-timeout", said,
                     "a hung CUDA call usually means a stuck GPU or driver: "
                     "dmesg | grep -i -e NVRM -e Xid; a reboot usually "
                     "clears it",
                     ExitCode::kTimeout);
    case CudaOutcome::kCrashed:
    case CudaOutcome::kFailed:
      return blocked("driver.cuda-failed", said,
                     "dmesg | grep -i -e NVRM -e Xid; reinstall the NVIDIA "
                     "driver " +
                         driver +
                         " from your offline repository if it "
                         "persists");
  }
  return satisfied("driver.cuda-ok", "");
}

}  // namespace

std::optional<Check> check_cuda(Context& ctx, const GpuInventory& inv,
                                DriverFindings& out) {
  if (ctx.opts.root != "/") {
    out.facts["cuda"] = {{"checked", false},
                         {"reason",
                          "--root: it would describe this machine, "
                          "not the tree"}};
    out.details.push_back(
        "CUDA: not checked with --root (it would describe this machine, not "
        "the tree)");
    return std::nullopt;
  }
  const auto timeout = std::min(kCudaTimeout, ctx.time_left());
  const CudaAnswer a = probe_cuda(ctx.opts.cuda_library, timeout);
  out.facts["cuda"] = answer_facts(a);
  // A GPU that workloads hold is no broken GPU: in EXCLUSIVE_PROCESS compute
  // mode a second context is refused (46, CUDA_ERROR_DEVICES_UNAVAILABLE),
  // and a full GPU has no room for one (2, CUDA_ERROR_OUT_OF_MEMORY). cuInit
  // passed, so CUDA itself works; a status run on a busy node must not
  // report the node broken.
  const bool on_a_gpu = a.failed_call.find("(GPU ") != std::string::npos;
  if (a.outcome == CudaOutcome::kFailed && on_a_gpu &&
      (a.error_code == kDevicesUnavailable || a.error_code == kOutOfMemory)) {
    out.facts["cuda"]["busy"] = true;
    out.warnings.push_back(
        "CUDA initialised, but " + a.message +
        ": the GPU is in use (exclusive compute mode, or its memory is full), "
        "so the probe could not try it; rerun when it is idle to prove it");
    return std::nullopt;
  }
  Check c = verdict(a, inv);
  if (c.status == CheckStatus::kBlocked) return c;

  const std::string version = cuda_version_text(a.driver_api_version);
  out.details.push_back("CUDA " + version +
                        " (driver API): " + std::to_string(a.devices.size()) +
                        " device(s), a context, 1 MiB allocated and copied "
                        "both ways on each, in " +
                        std::to_string(a.took.count()) + " ms");
  // CUDA_VISIBLE_DEVICES in gpunode's environment, or a GPU CUDA cannot
  // use: the plugin (which asks NVML) still advertises it.
  if (a.device_count >= 0 &&
      static_cast<std::size_t>(a.device_count) < inv.gpus.size()) {
    out.warnings.push_back("CUDA sees " + std::to_string(a.device_count) +
                           " of the " + std::to_string(inv.gpus.size()) +
                           " GPUs the driver lists: check CUDA_VISIBLE_DEVICES "
                           "and `dmesg | grep -i NVRM`");
  }
  // The smoke image's CUDA version against the driver's.
  const int needs = image_cuda_version(ctx.opts.smoke_image);
  out.facts["cuda"]["smoke_image_cuda"] =
      needs ? nlohmann::json(cuda_version_text(needs))
            : nlohmann::json(nullptr);
  if (needs > a.driver_api_version) {
    const std::string what = "driver " + inv.driver_version +
                             " supports CUDA " + version +
                             ", but the smoke image " + ctx.opts.smoke_image +
                             " needs CUDA " + cuda_version_text(needs);
    const std::string fix =
        "install an NVIDIA driver that supports CUDA " +
        cuda_version_text(needs) +
        " from your offline repository, or give --smoke-image an image "
        "built for CUDA " +
        version + " or older";
    // Only the smoke test runs that image; for other workloads it is a
    // warning, since each image states its own requirement.
    if (ctx.opts.smoke) return blocked("driver.cuda-too-old", what, fix);
    out.warnings.push_back(what + ": " + fix);
  }
  return std::nullopt;
}

}  // namespace gpunode
