// NVML through dlopen. The declarations below and in nvml_abi.hpp mirror
// nvml.h (NVML API reference); they are part of NVML's stable C ABI.
#include "gpu/nvml.hpp"

#include <string>
#include <utility>

#include "gpu/nvml_abi.hpp"
#include "gpu/nvml_health.hpp"
#include "gpu/shared_library.hpp"

namespace gpunode {
namespace {

// nvmlMemory_t (the v1 struct that nvmlDeviceGetMemoryInfo fills).
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// Buffer sizes from nvml.h: NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE (80),
// NVML_DEVICE_NAME_V2_BUFFER_SIZE and NVML_DEVICE_UUID_V2_BUFFER_SIZE (96).
constexpr unsigned kDriverVersionBuffer = 80;
constexpr unsigned kNameBuffer = 96;
constexpr unsigned kUuidBuffer = 96;

// nvmlDeviceGetMigMode's NVML_DEVICE_MIG_ENABLE.
constexpr unsigned kMigEnable = 1;

using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using ErrorStringFn = const char* (*)(NvmlReturn);
using SystemGetDriverVersionFn = NvmlReturn (*)(char*, unsigned);
using DeviceGetCountFn = NvmlReturn (*)(unsigned*);
using DeviceGetHandleByIndexFn = NvmlReturn (*)(unsigned, NvmlDevice*);
using DeviceGetNameFn = NvmlReturn (*)(NvmlDevice, char*, unsigned);
using DeviceGetUuidFn = NvmlReturn (*)(NvmlDevice, char*, unsigned);
using DeviceGetMemoryInfoFn = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
using DeviceGetMigModeFn = NvmlReturn (*)(NvmlDevice, unsigned*, unsigned*);

// Calls nvmlShutdown once nvmlInit_v2 has succeeded, on every path out:
// NVML counts initialisations, and a leaked one keeps its threads alive.
class Session {
 public:
  explicit Session(ShutdownFn shutdown) : shutdown_(shutdown) {}
  ~Session() { shutdown_(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  ShutdownFn shutdown_;
};

NvmlAnswer fail(NvmlOutcome outcome, std::string message) {
  return NvmlAnswer{
      outcome, Error{ExitCode::kBlocked, "driver", std::move(message), {}}};
}

}  // namespace

const char* nvml_outcome_name(NvmlOutcome outcome) {
  switch (outcome) {
    case NvmlOutcome::kOk:
      return "ok";
    case NvmlOutcome::kLibraryMissing:
      return "library missing";
    case NvmlOutcome::kDriverNotLoaded:
      return "driver not loaded";
    case NvmlOutcome::kVersionMismatch:
      return "version mismatch";
    case NvmlOutcome::kFailed:
      return "failed";
  }
  return "unknown";
}

NvmlAnswer query_nvml(const std::string& library) {
  SharedLibrary lib(library);
  if (!lib.loaded()) {
    return fail(NvmlOutcome::kLibraryMissing,
                "cannot load " + library + ": " + lib.error());
  }

  const auto init = lib.symbol<InitFn>("nvmlInit_v2");
  const auto shutdown = lib.symbol<ShutdownFn>("nvmlShutdown");
  const auto error_string = lib.symbol<ErrorStringFn>("nvmlErrorString");
  const auto driver_version =
      lib.symbol<SystemGetDriverVersionFn>("nvmlSystemGetDriverVersion");
  const auto get_count = lib.symbol<DeviceGetCountFn>("nvmlDeviceGetCount_v2");
  const auto get_handle =
      lib.symbol<DeviceGetHandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  const auto get_name = lib.symbol<DeviceGetNameFn>("nvmlDeviceGetName");
  const auto get_uuid = lib.symbol<DeviceGetUuidFn>("nvmlDeviceGetUUID");
  const auto get_memory =
      lib.symbol<DeviceGetMemoryInfoFn>("nvmlDeviceGetMemoryInfo");
  // Optional: drivers older than R450 have no MIG, and then no MIG call.
  const auto get_mig = lib.symbol<DeviceGetMigModeFn>("nvmlDeviceGetMigMode");

  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", init != nullptr},
      {"nvmlShutdown", shutdown != nullptr},
      {"nvmlSystemGetDriverVersion", driver_version != nullptr},
      {"nvmlDeviceGetCount_v2", get_count != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", get_handle != nullptr},
      {"nvmlDeviceGetName", get_name != nullptr},
      {"nvmlDeviceGetUUID", get_uuid != nullptr},
      {"nvmlDeviceGetMemoryInfo", get_memory != nullptr},
  };
  for (const auto& [name, present] : required) {
    if (!present) {
      return fail(NvmlOutcome::kFailed,
                  library + " has no " + name + " (not NVML, or too old)");
    }
  }

  auto describe = [&](NvmlReturn rc) -> std::string {
    const char* text = error_string != nullptr ? error_string(rc) : nullptr;
    std::string out = text != nullptr ? text : "NVML error";
    return out + " (" + std::to_string(rc) + ")";
  };
  // The outcome a failed call stands for: the two driver-level errors are a
  // verdict on the driver; the rest only says NVML could not answer.
  auto failure = [&](const std::string& call, NvmlReturn rc) {
    NvmlOutcome outcome = NvmlOutcome::kFailed;
    if (rc == kNvmlDriverNotLoaded) outcome = NvmlOutcome::kDriverNotLoaded;
    if (rc == kNvmlLibRmVersionMismatch)
      outcome = NvmlOutcome::kVersionMismatch;
    std::string message = call + ": " + describe(rc);
    if (rc == kNvmlNoPermission) message += "; run gpunode as root";
    return fail(outcome, std::move(message));
  };

  if (NvmlReturn rc = init(); rc != kNvmlSuccess) {
    return failure("nvmlInit_v2", rc);
  }
  Session session(shutdown);

  GpuInventory inventory;
  inventory.source = "NVML";
  {
    char buf[kDriverVersionBuffer] = {};
    if (NvmlReturn rc = driver_version(buf, sizeof buf); rc != kNvmlSuccess) {
      return failure("nvmlSystemGetDriverVersion", rc);
    }
    inventory.driver_version = buf;
  }

  unsigned count = 0;
  if (NvmlReturn rc = get_count(&count); rc != kNvmlSuccess) {
    return failure("nvmlDeviceGetCount_v2", rc);
  }
  for (unsigned i = 0; i < count; ++i) {
    const std::string which = " (GPU " + std::to_string(i) + ")";
    NvmlDevice device = nullptr;
    if (NvmlReturn rc = get_handle(i, &device); rc != kNvmlSuccess) {
      return failure("nvmlDeviceGetHandleByIndex_v2" + which, rc);
    }
    GpuInfo gpu;
    gpu.index = static_cast<int>(i);
    {
      char buf[kNameBuffer] = {};
      if (NvmlReturn rc = get_name(device, buf, sizeof buf);
          rc != kNvmlSuccess) {
        return failure("nvmlDeviceGetName" + which, rc);
      }
      gpu.name = buf;
    }
    {
      char buf[kUuidBuffer] = {};
      if (NvmlReturn rc = get_uuid(device, buf, sizeof buf);
          rc != kNvmlSuccess) {
        return failure("nvmlDeviceGetUUID" + which, rc);
      }
      gpu.uuid = buf;
    }
    {
      NvmlMemory memory{};
      NvmlReturn rc = get_memory(device, &memory);
      if (rc == kNvmlSuccess) {
        gpu.memory_mib = memory.total / (1024ULL * 1024ULL);
      } else if (rc != kNvmlNotSupported) {
        // Not Supported is the normal answer of unified-memory GPUs
        // (GH200, GB10): no memory of their own to report.
        return failure("nvmlDeviceGetMemoryInfo" + which, rc);
      }
    }
    if (get_mig != nullptr) {
      unsigned current = 0, pending = 0;
      NvmlReturn rc = get_mig(device, &current, &pending);
      if (rc == kNvmlSuccess) {
        gpu.mig = current == kMigEnable ? GpuInfo::Mig::kEnabled
                                        : GpuInfo::Mig::kDisabled;
      } else if (rc == kNvmlNotSupported) {
        gpu.mig = GpuInfo::Mig::kUnsupported;
      } else {
        return failure("nvmlDeviceGetMigMode" + which, rc);
      }
    }
    gpu.health = read_nvml_health(lib, device);
    inventory.gpus.push_back(std::move(gpu));
  }
  return NvmlAnswer{NvmlOutcome::kOk, std::move(inventory)};
}

}  // namespace gpunode
