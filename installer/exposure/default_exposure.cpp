// The default variant: the platform's plain manifest, one nvidia.com/gpu
// slot per GPU, no ConfigMap, and no settings of its own.
#include "exposure/gpu_exposure.hpp"
#include "kube/manifests.hpp"

namespace gpunode {
namespace {

class DefaultExposure final : public GpuExposure {
 public:
  using GpuExposure::GpuExposure;
  std::string resource() const override { return kGpuResource; }
  int slots_per_gpu() const override { return 1; }

  Result<PluginObjects> objects(const ManifestTexts& texts) const override {
    auto docs = yaml_documents(texts.device_plugin,
                               "manifests/nvidia-device-plugin.yml");
    if (!docs) return docs.error();
    PluginObjects out;
    for (auto& doc : *docs)
      if (doc.value("kind", "") == "DaemonSet") out.daemonset = doc;
    return out;
  }
};

SharingOrProblem settle(std::optional<long long> replicas, bool rename) {
  auto refuse = [](SharingSetting s, std::string message) {
    return SharingOrProblem{std::nullopt,
                            SharingProblem{s, std::move(message)}};
  };
  if (replicas) {
    return refuse(SharingSetting::kReplicas,
                  "applies only to --variant time-slicing (the default "
                  "manifest advertises one slot per GPU)");
  }
  if (rename)
    return refuse(SharingSetting::kRename,
                  "applies only to --variant time-slicing");
  return {Sharing{}, std::nullopt};
}

}  // namespace

ExposureKind default_exposure() {
  ExposureKind k;
  k.name = Variant::kDefault.name;
  k.summary = "one slot per GPU";
  k.settle = settle;
  k.make = [](const Sharing& s) {
    return std::make_unique<DefaultExposure>(s);
  };
  // No recognize: the fallback, what a DaemonSet that mounts no other
  // strategy's config runs.
  return k;
}

}  // namespace gpunode
