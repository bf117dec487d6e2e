// Time-slicing: the platform's time-slicing manifest, whose ConfigMap tells
// the device plugin to advertise each GPU as N slots (replicas), as
// nvidia.com/gpu or, renamed, nvidia.com/gpu.shared.
#include <yaml-cpp/yaml.h>

#include "exposure/gpu_exposure.hpp"
#include "kube/manifests.hpp"
#include "plugin/device_plugin_plan.hpp"

namespace gpunode {
namespace {

// The device plugin's own config file: renameByDefault belongs under
// sharing.timeSlicing (under `flags` the plugin ignores it; device-plugin
// #1433); replicas are within sharing.hpp's bounds already.
Result<std::string> render_plugin_config(const std::string& text, int replicas,
                                         bool rename) {
  try {
    YAML::Node config = YAML::Load(text);
    YAML::Node slicing = config["sharing"]["timeSlicing"];
    slicing["renameByDefault"] = rename;
    bool found = false;
    for (auto resource : slicing["resources"]) {
      if (resource["name"].as<std::string>() == kGpuResource) {
        resource["replicas"] = replicas;
        found = true;
      }
    }
    if (!found) {
      return Error{
          ExitCode::kUsage,
          "plugin",
          "the time-slicing manifest's config has no resource nvidia.com/gpu",
          {}};
    }
    YAML::Emitter out;
    out << config;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception& e) {
    return Error{
        ExitCode::kUsage,
        "plugin",
        "the time-slicing manifest's config.yaml is not valid YAML: " + e.msg,
        {}};
  }
}

class TimeSlicingExposure final : public GpuExposure {
 public:
  using GpuExposure::GpuExposure;
  std::string resource() const override {
    // renameByDefault: the plugin appends ".shared" to a time-sliced
    // resource (k8s-device-plugin api/config/v1/resources.go).
    return settings().rename ? kSharedGpuResource : kGpuResource;
  }
  int slots_per_gpu() const override { return settings().replicas; }
  std::string install_flags() const override {
    return GpuExposure::install_flags() + " --replicas " +
           std::to_string(settings().replicas);
  }

  Result<PluginObjects> objects(const ManifestTexts& texts) const override {
    auto docs = yaml_documents(
        texts.time_slicing, "manifests/nvidia-device-plugin-timeSlicing.yml");
    if (!docs) return docs.error();
    PluginObjects out;
    for (auto& doc : *docs) {
      const std::string kind = doc.value("kind", "");
      if (kind == "ConfigMap") {
        auto config =
            render_plugin_config(doc["data"]["config.yaml"].get<std::string>(),
                                 settings().replicas, settings().rename);
        if (!config) return config.error();
        doc["data"]["config.yaml"] = *config;
        out.configmap = doc;
      } else if (kind == "DaemonSet") {
        out.daemonset = doc;
      }
    }
    return out;
  }
};

SharingOrProblem settle(std::optional<long long> replicas, bool rename) {
  auto refuse = [](std::string message) {
    return SharingOrProblem{
        std::nullopt,
        SharingProblem{SharingSetting::kReplicas, std::move(message)}};
  };
  const long long n = replicas.value_or(kDefaultSharedReplicas);
  if (n < kMinSharedReplicas) {
    return refuse("time-slicing needs at least " +
                  std::to_string(kMinSharedReplicas) +
                  " replicas (the device plugin rejects fewer), got " +
                  std::to_string(n));
  }
  if (n > kMaxReplicas) {
    return refuse(std::to_string(n) + " is more than " +
                  std::to_string(kMaxReplicas) + " slots per GPU");
  }
  Sharing out;
  out.variant = Variant::kTimeSlicing;
  out.replicas = static_cast<int>(n);
  out.rename = rename;
  return {out, std::nullopt};
}

// A pod spec that mounts the plugin ConfigMap runs its config.yaml's
// sharing.timeSlicing: replicas for nvidia.com/gpu and renameByDefault.
std::optional<Result<Sharing>> recognize(const kube::json& pod_spec,
                                         const std::optional<kube::json>& cm) {
  if (!mounts_plugin_config(pod_spec)) return std::nullopt;
  if (!cm)
    return live_config_unreadable("the plugin pods mount it, but it is gone");
  const kube::json data = cm->value("data", kube::json::object());
  if (!data.contains("config.yaml") || !data["config.yaml"].is_string())
    return live_config_unreadable("it has no config.yaml");
  Sharing s;
  s.variant = Variant::kTimeSlicing;
  const std::string shares_none =
      "its config.yaml shares no " + std::string(kGpuResource);
  try {
    const YAML::Node config =
        YAML::Load(data["config.yaml"].get<std::string>());
    const YAML::Node sharing = config["sharing"];
    const YAML::Node slicing =
        sharing && sharing.IsMap() ? sharing["timeSlicing"] : YAML::Node();
    if (!slicing || !slicing.IsMap())
      return live_config_unreadable(shares_none);
    s.rename =
        slicing["renameByDefault"] && slicing["renameByDefault"].as<bool>();
    s.replicas = 0;
    for (const auto& r : slicing["resources"]) {
      if (r["name"] && r["name"].as<std::string>() == kGpuResource)
        s.replicas = r["replicas"].as<int>();
    }
    if (s.replicas < 1) return live_config_unreadable(shares_none);
  } catch (const YAML::Exception& e) {
    return live_config_unreadable(
        "its config.yaml is not as the plugin reads it: " + e.msg);
  }
  return Result<Sharing>(s);
}

}  // namespace

ExposureKind time_slicing_exposure() {
  ExposureKind k;
  k.name = Variant::kTimeSlicing.name;
  k.summary = "--replicas slots per GPU";
  k.settle = settle;
  k.make = [](const Sharing& s) {
    return std::make_unique<TimeSlicingExposure>(s);
  };
  k.recognize = recognize;
  return k;
}

}  // namespace gpunode
