// How a node's GPUs become schedulable: one strategy per --variant, behind
// one interface. A strategy says what the device plugin's objects are, the
// resource each GPU is advertised as and how many slots it gives, and what
// the smoke Pod asks for; the stages, the rollout, the wait, the diagnosis
// and plan read these and never the variant itself. A new strategy (MIG,
// CDI device lists, a DRA driver) is one more implementation and one
// registry entry (builtin_exposures.cpp); test/unit/exposure_sketch_test.cpp
// adds a MIG-single one with no edits outside that file.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpunode/kube.hpp"
#include "gpunode/sharing.hpp"
#include "plugin/manifest_texts.hpp"

namespace gpunode {

// The manifest's objects for a strategy, before what gpunode adds to every
// variant (the managed label, the image, the config digest, the GPU-node
// affinity: plugin/device_plugin_plan.cpp).
struct PluginObjects {
  kube::json daemonset;
  std::optional<kube::json> configmap;
};

class GpuExposure {
 public:
  explicit GpuExposure(Sharing settings) : settings_(std::move(settings)) {}
  virtual ~GpuExposure() = default;

  const Sharing& settings() const { return settings_; }
  // The --variant name.
  const std::string& name() const { return settings_.variant.name; }
  // The extended resource each slot is advertised as.
  virtual std::string resource() const = 0;
  // The slots one GPU gives.
  virtual int slots_per_gpu() const = 0;
  // The device plugin's objects from the run's manifests.
  virtual Result<PluginObjects> objects(const ManifestTexts& texts) const = 0;
  // The flags after `install` that ask for this strategy:
  // " --variant time-slicing --replicas 4".
  virtual std::string install_flags() const;

  // What a node with `gpus` GPUs advertises.
  long long slots_for(int gpus) const {
    return static_cast<long long>(gpus) * slots_per_gpu();
  }
  // The smoke Pod's limits: one slot.
  kube::json smoke_limits() const { return {{resource(), 1}}; }
  // A node sees no difference: the same resource and slots per GPU.
  bool same_as(const GpuExposure& other) const {
    return resource() == other.resource() &&
           slots_per_gpu() == other.slots_per_gpu();
  }
  // {variant, replicas, resource}: the facts of --json that name it.
  kube::json facts() const;
  // "time-slicing, 4 slot(s) per GPU as nvidia.com/gpu": for messages.
  std::string describe() const;

 private:
  Sharing settings_;
};

// A strategy as the registry knows it.
struct ExposureKind {
  std::string name;     // as --variant gives it
  std::string summary;  // "one slot per GPU": for --variant's help
  // The settings from --replicas and --rename-shared as the operator gave
  // them (or not), or what is wrong with them.
  std::function<SharingOrProblem(std::optional<long long> replicas,
                                 bool rename)>
      settle;
  std::function<std::unique_ptr<GpuExposure>(const Sharing&)> make;
  // The settings a live plugin pod spec (and the ConfigMap it mounts)
  // runs, when they are this strategy's; nullopt when they are not. Empty
  // for the fallback (the first kind): it claims what no other does.
  std::function<std::optional<Result<Sharing>>(
      const kube::json& pod_spec, const std::optional<kube::json>& configmap)>
      recognize;
};

// The strategies, the fallback (default) first.
const std::vector<ExposureKind>& exposure_kinds();
// Adds a strategy for as long as it lives (a later strategy's sketch in a
// test); the name must be new.
class ExposureRegistration {
 public:
  explicit ExposureRegistration(ExposureKind kind);
  ~ExposureRegistration();
  ExposureRegistration(const ExposureRegistration&) = delete;
  ExposureRegistration& operator=(const ExposureRegistration&) = delete;

 private:
  std::string name_;
};
const ExposureKind* find_exposure_kind(std::string_view name);
// "'default' or 'time-slicing'"; with the summaries, "'default' (one slot
// per GPU) or ...": --variant's help.
std::string exposure_choices(bool with_summaries = false);

// "" when the variant names a registered strategy, else what is wrong,
// as a settings file or variable states it (cli/site_config.cpp).
std::string variant_problem(std::string_view variant);
// Whether the variant takes --replicas (a site default applies to it).
bool variant_takes_replicas(std::string_view variant);

// The one parse: a variant name, an optional replica count and the rename
// switch, each as the operator gave it (or not). The variant's strategy
// settles the rest: time-slicing defaults replicas to
// kDefaultSharedReplicas; the default variant refuses them, and rename.
SharingOrProblem parse_sharing(std::string_view variant,
                               std::optional<long long> replicas, bool rename);

// The strategy for settings that parse_sharing() made.
std::shared_ptr<const GpuExposure> make_exposure(const Sharing& settings);

// The settings a live plugin pod spec runs: the first strategy that claims
// it, else the fallback.
Result<Sharing> recognize_exposure(const kube::json& pod_spec,
                                   const std::optional<kube::json>& configmap);

}  // namespace gpunode
