// A third GPU exposure strategy, sketched here and nowhere else: MIG with
// the device plugin's "single" strategy (every GPU split into 7 equal MIG
// devices, each advertised as nvidia.com/gpu; k8s-device-plugin
// docs "MIG support": MIG_STRATEGY=single). It is registered for this
// file's tests only, and then the flags' parse, the plan, the plugin stage,
// the live read-back, the allocatable wait and the smoke Pod all follow it
// with no edit outside this file: the measure of issue 26's interface.
#include <catch2/catch.hpp>

#include "cluster_bed.hpp"
#include "exposure/gpu_exposure.hpp"
#include "kube/manifests.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "plugin/live_plugin.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using kube::json;
using test::ClusterBed;
using test::PluginPod;

const Variant kMigSingle{"mig-single"};
constexpr int kMigDevicesPerGpu = 7;  // the 1g profile on H100 and H200

json* plugin_container(json& daemonset) {
  for (auto& c : daemonset["spec"]["template"]["spec"]["containers"])
    if (c.value("name", "") == "nvidia-device-plugin-ctr") return &c;
  return nullptr;
}

class MigSingleExposure final : public GpuExposure {
 public:
  using GpuExposure::GpuExposure;
  std::string resource() const override { return kGpuResource; }
  int slots_per_gpu() const override { return kMigDevicesPerGpu; }
  Result<PluginObjects> objects(const ManifestTexts& texts) const override {
    auto docs = yaml_documents(texts.device_plugin, "device plugin manifest");
    if (!docs) return docs.error();
    PluginObjects out;
    for (auto& doc : *docs)
      if (doc.value("kind", "") == "DaemonSet") out.daemonset = doc;
    json* ctr = plugin_container(out.daemonset);
    if (ctr == nullptr)
      return Error{ExitCode::kUsage, "plugin", "no plugin container", {}};
    (*ctr)["env"].push_back({{"name", "MIG_STRATEGY"}, {"value", "single"}});
    return out;
  }
};

ExposureKind mig_single_kind() {
  ExposureKind k;
  k.name = kMigSingle.name;
  k.summary = "one slot per MIG device";
  k.settle = [](std::optional<long long> replicas, bool rename) {
    if (replicas || rename) {
      return SharingOrProblem{
          std::nullopt, SharingProblem{replicas ? SharingSetting::kReplicas
                                                : SharingSetting::kRename,
                                       "does not apply to mig-single"}};
    }
    Sharing s;
    s.variant = kMigSingle;
    return SharingOrProblem{s, std::nullopt};
  };
  k.make = [](const Sharing& s) {
    return std::make_unique<MigSingleExposure>(s);
  };
  k.recognize =
      [](const json& pod_spec,
         const std::optional<json>&) -> std::optional<Result<Sharing>> {
    for (const auto& c : pod_spec.value("containers", json::array())) {
      for (const auto& e : c.value("env", json::array())) {
        if (e.value("name", "") == "MIG_STRATEGY" &&
            e.value("value", "") == "single") {
          Sharing s;
          s.variant = kMigSingle;
          return Result<Sharing>(s);
        }
      }
    }
    return std::nullopt;
  };
  return k;
}

// A cluster whose only GPU node (2 GPUs) has no device plugin yet.
void fresh(ClusterBed& bed) {
  bed.plugin_absent();
  bed.other_daemonsets({});
  bed.node_advertises({});
}

}  // namespace

TEST_CASE("exposure sketch: a registered strategy is a --variant choice",
          "[exposure]") {
  {
    ExposureRegistration mig(mig_single_kind());
    auto parsed = parse_sharing("mig-single", std::nullopt, false);
    REQUIRE(parsed.sharing);
    CHECK(parsed.sharing->variant == kMigSingle);
    CHECK(parsed.sharing->resource() == "nvidia.com/gpu");
    auto refused = parse_sharing("mig-single", 4, false);
    REQUIRE(refused.problem);
    CHECK(refused.problem->setting == SharingSetting::kReplicas);
    CHECK(variant_problem("mig-single").empty());
    CHECK_FALSE(variant_takes_replicas("mig-single"));
    CHECK(exposure_choices() == "'default', 'time-slicing' or 'mig-single'");
    CHECK_THROWS_AS(ExposureRegistration(mig_single_kind()), std::logic_error);
  }
  // Gone with its registration: the built-ins are as they were.
  CHECK_THAT(variant_problem("mig-single"),
             Catch::Contains("(choose 'default' or 'time-slicing')"));
  CHECK(exposure_choices(true) ==
        "'default' (one slot per GPU) or 'time-slicing' (--replicas slots "
        "per GPU)");
}

TEST_CASE("exposure sketch: the plan is the strategy's objects and slots",
          "[exposure]") {
  ExposureRegistration mig(mig_single_kind());
  Sharing s;
  s.variant = kMigSingle;
  auto plan = plan_device_plugin(s, "img:1");
  REQUIRE(plan);
  CHECK_FALSE(plan->configmap);
  CHECK(plan->resource == "nvidia.com/gpu");
  CHECK(plan->replicas == kMigDevicesPerGpu);
  CHECK(plan->slots_for(2) == 14);
  CHECK(plan->exposure->smoke_limits() == json{{"nvidia.com/gpu", 1}});
  CHECK(plan->exposure->install_flags() == " --variant mig-single");
  const json* ctr = plugin_container(plan->daemonset);
  REQUIRE(ctr != nullptr);
  CHECK((*ctr)["image"] == "img:1");
  CHECK((*ctr)["env"].dump().find("MIG_STRATEGY") != std::string::npos);
  // What gpunode adds to every strategy's objects.
  CHECK(plan->daemonset["spec"]["template"]["metadata"]["annotations"]
                       [kConfigHashAnnotation] == plan->config_hash);
  // The applied DaemonSet reads back as the strategy that made it; the
  // plain manifest still reads back as the default.
  auto live = sharing_of(plan->daemonset["spec"]["template"]["spec"], {});
  REQUIRE(live);
  CHECK(live->variant == kMigSingle);
  auto plain = plan_device_plugin(Sharing{}, "img:1");
  REQUIRE(plain);
  CHECK(sharing_of(plain->daemonset["spec"]["template"]["spec"], {})->variant ==
        Variant::kDefault);
}

TEST_CASE("exposure sketch: the stages apply it, wait for it and smoke it",
          "[exposure][cluster-stage]") {
  ExposureRegistration mig(mig_single_kind());
  ClusterBed bed(2);
  bed.sharing(kMigSingle);
  fresh(bed);
  auto plugin = make_plugin_stage();
  Check c = plugin->check(bed.context());
  REQUIRE(c.status == CheckStatus::kNeeded);
  CHECK_THAT(c.summary, Catch::Contains("(mig-single variant, 7 slot(s) per "
                                        "GPU as nvidia.com/gpu)"));
  CHECK(c.facts["plugin"]["variant"] == "mig-single");
  REQUIRE(plugin->apply(bed.context(), c));
  REQUIRE(bed.kube().stored(daemonset_path()));
  bed.new_run();
  Check again = plugin->check(bed.context());
  CHECK(again.status == CheckStatus::kSatisfied);
  CHECK(again.code == "plugin.ok");
  // The cluster's settings as an admin reads them back.
  auto live = read_cluster_plugin(bed.kube(), bed.context().deadline);
  REQUIRE(live);
  REQUIRE(*live);
  CHECK((*live)->exposure->name() == "mig-single");
  CHECK(again.facts["cluster_plugin"]["replicas"] == kMigDevicesPerGpu);

  // The wait counts 2 GPUs x 7 MIG devices.
  bed.new_run();
  bed.node_advertises({{kGpuResource, 14}});
  bed.plugin_pods({PluginPod{}});
  bed.events_about(PluginPod{}.name, {});
  Check counted = make_allocatable_stage()->check(bed.context());
  CHECK(counted.status == CheckStatus::kSatisfied);
  CHECK(counted.summary ==
        "node gpu-node-1 advertises nvidia.com/gpu: 14 (2 GPU x 7)");
  bed.new_run();
  bed.node_advertises({{kGpuResource, 2}});
  Check short_of = make_allocatable_stage()->check(bed.context());
  CHECK(short_of.status == CheckStatus::kNeeded);

  // The smoke Pod asks for the strategy's resource.
  bed.new_run();
  Check smoke = make_smoke_stage()->check(bed.context());
  CHECK_THAT(smoke.action, Catch::Contains("nvidia.com/gpu: 1"));
}

}  // namespace gpunode
