// The plugin stage against a FakeKubeClient: each branch of its check (as
// it is, to create, to update, another plugin in the way, what a switch
// leaves behind) and the exact writes of its apply, in their order.
#include <catch2/catch.hpp>

#include "cluster_bed.hpp"
#include "stages/plugin_cluster.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using test::any_contains;
using test::ClusterBed;
using test::KubeVerb;
using test::OtherPluginSet;

const std::string kOtherPath =
    "/apis/apps/v1/namespaces/nvidia/daemonsets/nvdp-nvidia-device-plugin";

std::string apply_line(const std::string& path) { return "APPLY " + path; }
std::string delete_line(const std::string& path) { return "DELETE " + path; }

// The cluster of a fresh node: no plugin, no other DaemonSet, a node that
// advertises nothing yet.
void fresh(ClusterBed& bed) {
  bed.plugin_absent();
  bed.other_daemonsets({});
  bed.node_advertises({});
}

// Applies what `c` asked for and checks again in a new run: nothing is left
// to write.
void apply_then_recheck(ClusterBed& bed, Stage& stage, const Check& c) {
  REQUIRE(c.status == CheckStatus::kNeeded);
  auto applied = stage.apply(bed.context(), c);
  REQUIRE(applied);
  const std::size_t writes = bed.kube().writes().size();
  bed.new_run();
  Check again = stage.check(bed.context());
  CHECK(again.status == CheckStatus::kSatisfied);
  CHECK(again.code == "plugin.ok");
  CHECK(bed.kube().writes().size() == writes);
}

}  // namespace

TEST_CASE("plugin: the applied DaemonSet is satisfied and nothing is written",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.plugin_applied();
  bed.other_daemonsets({});
  Check c = make_plugin_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.code == "plugin.ok");
  CHECK_THAT(c.summary,
             Catch::Contains("nvidia-device-plugin-daemonset is applied "
                             "(default variant, 1 slot(s) per GPU as "
                             "nvidia.com/gpu)"));
  CHECK(c.warnings.empty());
  CHECK(bed.kube().writes().empty());
  // Nothing about to change: the node's resources are not even read.
  CHECK(bed.kube().count(KubeVerb::kGet, bed.node_path()) == 0);
  CHECK(bed.kube().unanswered().empty());
}

TEST_CASE("plugin: no DaemonSet -> create it, apply writes only it",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  fresh(bed);
  auto stage = make_plugin_stage();
  Check c = stage->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "plugin.apply");
  CHECK(c.action ==
        "create DaemonSet kube-system/nvidia-device-plugin-daemonset (default "
        "variant; its pods restart with it)");
  CHECK(c.details.empty());
  CHECK(bed.kube().writes().empty());  // a check writes nothing

  bed.kube().clear_requests();
  apply_then_recheck(bed, *stage, c);
  const auto writes = bed.kube().writes();
  REQUIRE(writes.size() == 1);
  CHECK(writes[0].line() == apply_line(daemonset_path()));
  CHECK(writes[0].body == bed.rendered().daemonset);
  CHECK(bed.kube().unanswered().empty());
}

TEST_CASE("plugin: a DaemonSet that differs is updated, naming the field",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  fresh(bed);
  kube::json old = bed.rendered().daemonset;
  old["spec"]["template"]["spec"].erase("runtimeClassName");
  bed.kube().put(daemonset_path(), old);
  auto stage = make_plugin_stage();
  Check c = stage->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "plugin.apply");
  CHECK_THAT(c.action, Catch::StartsWith("update DaemonSet kube-system/"
                                         "nvidia-device-plugin-daemonset"));
  REQUIRE(c.details.size() == 1);
  CHECK_THAT(c.details[0],
             Catch::StartsWith("live DaemonSet: ") &&
                 Catch::Contains("spec.template.spec.runtimeClassName"));
  apply_then_recheck(bed, *stage, c);
  CHECK(bed.kube().write_lines() ==
        std::vector<std::string>{apply_line(daemonset_path())});
}

TEST_CASE("plugin: time-slicing creates the ConfigMap before the DaemonSet",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.sharing(Variant::kTimeSlicing, 4);
  fresh(bed);
  auto stage = make_plugin_stage();
  Check c = stage->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "plugin.apply");
  CHECK(c.action ==
        "create ConfigMap kube-system/nvidia-device-plugin-config (4 replicas, "
        "nvidia.com/gpu); create DaemonSet "
        "kube-system/nvidia-device-plugin-daemonset (time-slicing variant; its "
        "pods restart with it)");
  CHECK_THAT(c.summary,
             Catch::Contains("time-slicing variant, 4 slot(s) per GPU"));
  apply_then_recheck(bed, *stage, c);
  // The restarted pods read the ConfigMap when they start: it goes first.
  CHECK(bed.kube().write_lines() ==
        std::vector<std::string>{apply_line(configmap_path()),
                                 apply_line(daemonset_path())});
  CHECK(bed.kube().writes()[0].body == *bed.rendered().configmap);
}

TEST_CASE("plugin: new replicas update the ConfigMap and the DaemonSet",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.sharing(Variant::kTimeSlicing, 2);
  bed.plugin_applied();
  bed.other_daemonsets({});
  bed.node_advertises({{"nvidia.com/gpu", 2}});
  bed.sharing(Variant::kTimeSlicing, 4);
  auto stage = make_plugin_stage();
  Check c = stage->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK_THAT(c.action, Catch::StartsWith("update ConfigMap kube-system/"
                                         "nvidia-device-plugin-config (4 "
                                         "replicas, nvidia.com/gpu); update "
                                         "DaemonSet"));
  // The new config digest is on the pod template, and the config differs.
  CHECK(any_contains(c.details, "live DaemonSet: "));
  CHECK(any_contains(c.details, "live ConfigMap: "));
  apply_then_recheck(bed, *stage, c);
  CHECK(bed.kube().write_lines() ==
        std::vector<std::string>{apply_line(configmap_path()),
                                 apply_line(daemonset_path())});
}

TEST_CASE("plugin: after a switch to default the stale ConfigMap is deleted",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.sharing(Variant::kTimeSlicing, 4);
  bed.plugin_applied();
  bed.other_daemonsets({});
  bed.node_advertises({{"nvidia.com/gpu", 4}});
  bed.sharing(Variant::kDefault);
  auto stage = make_plugin_stage();
  Check c = stage->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK_THAT(c.action,
             Catch::Contains("update DaemonSet") &&
                 Catch::EndsWith("delete the stale ConfigMap "
                                 "kube-system/nvidia-device-plugin-config "
                                 "left by the time-slicing variant"));
  apply_then_recheck(bed, *stage, c);
  CHECK(bed.kube().write_lines() ==
        std::vector<std::string>{apply_line(daemonset_path()),
                                 delete_line(configmap_path())});
  CHECK_FALSE(bed.kube().stored(configmap_path()));
}

TEST_CASE("plugin: another NVIDIA device plugin blocks, named with its fix",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  fresh(bed);
  SECTION("installed by hand") {
    bed.other_daemonsets({OtherPluginSet{}});
    Check c = make_plugin_stage()->check(bed.context());
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "plugin.other-installed");
    CHECK(c.exit == ExitCode::kBlocked);
    CHECK_THAT(c.summary,
               Catch::Contains("DaemonSet nvidia/nvdp-nvidia-device-plugin; "
                               "two plugins on one node fight"));
    CHECK_THAT(
        c.fix,
        Catch::StartsWith("kubectl -n nvidia delete daemonset "
                          "nvdp-nvidia-device-plugin, or rerun gpunode with "
                          "--replace-existing") &&
            Catch::Contains("GEO_MLOPS_KUBERNETES_DEVICE_PLUGIN_NAME="
                            "nvdp-nvidia-device-plugin "
                            "GEO_MLOPS_KUBERNETES_DEVICE_PLUGIN_"
                            "NAMESPACE=nvidia"));
  }
  SECTION("installed by Helm") {
    OtherPluginSet helm;
    helm.helm_release = "nvdp";
    bed.other_daemonsets({helm});
    Check c = make_plugin_stage()->check(bed.context());
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "plugin.other-installed");
    CHECK_THAT(c.summary, Catch::Contains("(Helm release nvdp)"));
    CHECK_THAT(c.fix, Catch::StartsWith("helm -n nvidia uninstall nvdp, or "
                                        "rerun gpunode with "
                                        "--replace-existing"));
  }
  CHECK(bed.kube().writes().empty());
}

TEST_CASE(
    "plugin: a DaemonSet without the plugin's image is not another plugin",
    "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.plugin_applied();
  kube::json unrelated = ClusterBed::daemonset_object(OtherPluginSet{});
  unrelated["spec"]["template"]["spec"]["containers"][0]["image"] =
      "docker.io/library/fluent-bit:3.1";
  bed.kube().answer_list("/apis/apps/v1/daemonsets", {unrelated});
  Check c = make_plugin_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.code == "plugin.ok");
}

TEST_CASE("plugin: our own DaemonSet in the list is not another plugin",
          "[cluster-stage][plugin]") {
  // The list of all DaemonSets holds ours too (its image is the plugin's).
  ClusterBed bed;
  bed.plugin_applied();
  bed.kube().answer_list("/apis/apps/v1/daemonsets",
                         {*bed.kube().stored(daemonset_path())});
  Check c = make_plugin_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.code == "plugin.ok");
}

TEST_CASE("plugin: --replace-existing deletes the other plugin, then applies",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.opts.replace_existing = true;
  fresh(bed);
  OtherPluginSet helm;
  helm.helm_release = "nvdp";
  bed.other_daemonsets({helm});
  bed.kube().put(kOtherPath, ClusterBed::daemonset_object(helm));
  auto stage = make_plugin_stage();
  Check c = stage->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "plugin.apply");
  CHECK_THAT(c.action,
             Catch::StartsWith(
                 "delete DaemonSet nvidia/nvdp-nvidia-device-plugin; create "
                 "DaemonSet kube-system/nvidia-device-plugin-daemonset"));
  // What it leaves of the Helm release, and how to remove it all.
  CHECK(any_contains(c.warnings,
                     "--replace-existing deletes only DaemonSet "
                     "nvidia/nvdp-nvidia-device-plugin: Helm release nvdp "
                     "stays"));
  CHECK(any_contains(c.warnings, "helm -n nvidia uninstall nvdp"));

  REQUIRE(stage->apply(bed.context(), c));
  CHECK(bed.kube().write_lines() ==
        std::vector<std::string>{delete_line(kOtherPath),
                                 apply_line(daemonset_path())});
  CHECK_FALSE(bed.kube().stored(kOtherPath));
}

TEST_CASE("plugin: --replace-existing of a plugin not Helm's warns of nothing",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.opts.replace_existing = true;
  fresh(bed);
  bed.other_daemonsets({OtherPluginSet{}});
  Check c = make_plugin_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK_THAT(c.action, Catch::StartsWith("delete DaemonSet nvidia/"));
  CHECK(c.warnings.empty());
}

TEST_CASE("plugin: a resource the new plugin will not advertise is warned of",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  fresh(bed);
  bed.node_advertises({{"nvidia.com/gpu", 1}, {"nvidia.com/gpu.shared", 4}});
  Check c = make_plugin_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  REQUIRE(c.warnings.size() == 1);
  CHECK_THAT(c.warnings[0],
             Catch::StartsWith("node gpu-node-1 lists nvidia.com/gpu.shared: "
                               "4, which the device plugin gpunode installs "
                               "(nvidia.com/gpu) does not advertise") &&
                 Catch::Contains("kubectl patch node gpu-node-1 "
                                 "--subresource=status") &&
                 Catch::Contains("/status/capacity/nvidia.com~1gpu.shared"));
}

TEST_CASE("plugin: a node not (yet) in the cluster leaves nothing to warn of",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.plugin_absent();
  bed.other_daemonsets({});
  bed.kube().put_absent(bed.node_path());
  Check c = make_plugin_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "plugin.apply");
  CHECK(c.warnings.empty());
  CHECK(bed.kube().count(KubeVerb::kGet, bed.node_path()) == 1);
}

TEST_CASE("plugin: a renamed resource names the platform's settings",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.sharing(Variant::kTimeSlicing, 2, true);
  bed.plugin_applied();
  bed.other_daemonsets({});
  Check c = make_plugin_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK_THAT(c.summary, Catch::Contains("as nvidia.com/gpu.shared"));
  REQUIRE(c.warnings.size() == 1);
  CHECK_THAT(c.warnings[0],
             Catch::Contains("GEO_MLOPS_SERVING_GPU_RESOURCE=nvidia.com/"
                             "gpu.shared"));
}

TEST_CASE("plugin: a cluster that cannot be asked is the cluster's problem",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  fresh(bed);
  SECTION("not listening: reported once, later stages told at once") {
    bed.kube().answer_unreachable(KubeVerb::kList, "/apis/apps/v1/daemonsets");
    Check c = make_plugin_stage()->check(bed.context());
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == kClusterConnectionCode);
    CHECK_THAT(c.summary, Catch::Contains("cannot connect to the API server"));
    CHECK_THAT(c.fix, Catch::Contains("is k3s running?"));
    bed.kube().clear_requests();
    Check later = make_allocatable_stage()->check(bed.context());
    CHECK(later.code == kClusterConnectionCode);
    CHECK(bed.kube().requests().empty());
  }
  SECTION("forbidden: the cluster's code, and the cluster is asked again") {
    bed.kube().answer_status(KubeVerb::kGet, daemonset_path(), 403,
                             "daemonsets is forbidden");
    Check c = make_plugin_stage()->check(bed.context());
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == kClusterConnectionCode);
    CHECK_THAT(c.summary, Catch::Contains("daemonsets is forbidden (403"));
    bed.kube().clear_requests();
    (void)make_plugin_stage()->check(bed.context());
    CHECK_FALSE(bed.kube().requests().empty());
  }
  SECTION("a bad node name is the stage's own: plugin.node") {
    bed.opts.node = "gpu/node";
    Check c = make_plugin_stage()->check(bed.context());
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "plugin.node");
    CHECK(c.exit == ExitCode::kUsage);
    CHECK_THAT(c.summary, Catch::Contains("not a valid Kubernetes node name"));
  }
}

TEST_CASE("plugin: manifests that cannot be had are the stage's own",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  fresh(bed);
  bed.bundle_unusable();
  Check c = make_plugin_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "plugin.manifest");
  CHECK_THAT(c.summary, Catch::Contains("no-such-bundle"));
  CHECK(bed.kube().writes().empty());
}

TEST_CASE("plugin: a refused write is apply's error, and stops it",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.sharing(Variant::kTimeSlicing, 2);
  fresh(bed);
  bed.kube().answer_status(KubeVerb::kApply, configmap_path(), 422,
                           "ConfigMap is invalid");
  auto stage = make_plugin_stage();
  Check c = stage->check(bed.context());
  auto applied = stage->apply(bed.context(), c);
  REQUIRE_FALSE(applied);
  CHECK_THAT(applied.error().message,
             Catch::Contains("PATCH " + configmap_path() +
                             ": ConfigMap is invalid (422"));
  // The DaemonSet is not applied over a config that did not land.
  CHECK(bed.kube().write_lines() ==
        std::vector<std::string>{apply_line(configmap_path())});
}

TEST_CASE("plugin: the other plugin that cannot be deleted stops the apply",
          "[cluster-stage][plugin]") {
  ClusterBed bed;
  bed.opts.replace_existing = true;
  fresh(bed);
  bed.other_daemonsets({OtherPluginSet{}});
  bed.kube().answer_status(KubeVerb::kDelete, kOtherPath, 403,
                           "daemonsets.apps is forbidden");
  auto applied = make_plugin_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK_THAT(applied.error().message,
             Catch::StartsWith("DELETE " + kOtherPath));
  // Ours is not applied beside a plugin still running.
  CHECK(bed.kube().write_lines() ==
        std::vector<std::string>{delete_line(kOtherPath)});
}

TEST_CASE("plugin: in a plan's context apply's writes are all dryRun=All",
          "[cluster-stage][plugin][dry-run]") {
  ClusterBed bed;
  bed.sharing(Variant::kTimeSlicing, 4);
  bed.dry_run_writes();
  fresh(bed);
  auto stage = make_plugin_stage();
  Check c = stage->check(bed.context());
  REQUIRE(c.status == CheckStatus::kNeeded);
  CHECK(c.facts["objects"]["create"] ==
        kube::json::array(
            {"ConfigMap kube-system/nvidia-device-plugin-config",
             "DaemonSet kube-system/nvidia-device-plugin-daemonset"}));
  CHECK(c.facts["plugin"]["replicas"] == 4);
  REQUIRE(stage->apply(bed.context(), c));
  CHECK(bed.kube().write_lines() ==
        std::vector<std::string>{apply_line(configmap_path() + "?dryRun=All"),
                                 apply_line(daemonset_path() + "?dryRun=All")});
  // What a real apply would have stored is not there.
  CHECK_FALSE(bed.kube().stored(daemonset_path()));
}

}  // namespace gpunode
