// The allocatable stage against a FakeKubeClient: its check, every branch
// of its diagnosis (the lowest broken layer, bottom-up, as the cluster
// shows it), and its apply: a watch that reaches the count, and one whose
// deadline passes.
#include <catch2/catch.hpp>

#include "cluster_bed.hpp"
#include "stages/plugin_cluster.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using test::ClusterBed;
using test::FakeKubeClient;
using test::KubeVerb;
using test::PluginPod;
using test::WatchStream;

const std::string kPod = PluginPod{}.name;
const std::string kGpu = "nvidia.com/gpu";
const std::string kShared = "nvidia.com/gpu.shared";

// The plugin applied, its one pod healthy and current, no events about it;
// the node advertises `advertised` of the resource.
void healthy(ClusterBed& bed, long long advertised) {
  bed.plugin_applied();
  bed.node_advertises({{kGpu, advertised}});
  bed.plugin_pods({PluginPod{}});
  bed.events_about(kPod, {});
}

Check check(ClusterBed& bed) {
  return make_allocatable_stage()->check(bed.context());
}

// A check that waits, with the layer its diagnosis names: "layer: what".
Check waiting(ClusterBed& bed) {
  Check c = check(bed);
  REQUIRE(c.status == CheckStatus::kNeeded);
  REQUIRE(c.code == "allocatable.waiting");
  CHECK(bed.kube().writes().empty());
  CHECK(bed.kube().unanswered().empty());
  return c;
}

// The one detail of a diagnosis: "[layer] what; fix: how".
const std::string& diagnosis(const Check& c) {
  REQUIRE(c.details.size() == 1);
  return c.details[0];
}

WatchStream node_stream(ClusterBed& bed, std::vector<long long> counts,
                        const std::string& resource = kGpu) {
  WatchStream s;
  for (long long n : counts) {
    s.events.push_back({s.events.empty() ? "ADDED" : "MODIFIED",
                        bed.node_object({{resource, n}})});
  }
  return s;
}

}  // namespace

// ---- check ----

TEST_CASE("allocatable: GPUs x replicas advertised by current pods: satisfied",
          "[cluster-stage][allocatable]") {
  ClusterBed bed(2);
  bed.sharing(Variant::kTimeSlicing, 4);
  healthy(bed, 8);
  Check c = check(bed);
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.code == "allocatable.ok");
  CHECK(c.summary ==
        "node gpu-node-1 advertises nvidia.com/gpu: 8 (2 GPU x 4)");
  CHECK(c.warnings.empty());
  CHECK(bed.kube().writes().empty());
  CHECK(bed.kube().unanswered().empty());
}

TEST_CASE("allocatable: a renamed resource is satisfied with the settings",
          "[cluster-stage][allocatable]") {
  ClusterBed bed;
  bed.sharing(Variant::kTimeSlicing, 2, true);
  bed.plugin_applied();
  bed.node_advertises({{kShared, 2}});
  bed.plugin_pods({PluginPod{}});
  Check c = check(bed);
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.summary ==
        "node gpu-node-1 advertises nvidia.com/gpu.shared: 2 (1 GPU x 2)");
  REQUIRE(c.warnings.size() == 1);
  CHECK_THAT(c.warnings[0],
             Catch::Contains("GEO_MLOPS_SERVING_GPU_RESOURCE=nvidia.com/"
                             "gpu.shared"));
}

TEST_CASE("allocatable: the node not in the cluster is invalid input",
          "[cluster-stage][allocatable]") {
  ClusterBed bed;
  SECTION("a few nodes are named") {
    bed.node_missing({"cpu-node-1", "cpu-node-2"});
    Check c = check(bed);
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "allocatable.no-node");
    CHECK(c.exit == ExitCode::kUsage);
    CHECK(c.summary ==
          "node gpu-node-1 (from node-name in /etc/rancher/k3s/config.yaml, "
          "else the host name) is not in the cluster (its nodes: cpu-node-1, "
          "cpu-node-2)");
    CHECK_THAT(c.fix, Catch::StartsWith("pass --node with the name"));
  }
  SECTION("none to name") {
    bed.node_missing({});
    Check c = check(bed);
    CHECK(c.code == "allocatable.no-node");
    CHECK_THAT(c.summary, Catch::EndsWith("is not in the cluster"));
  }
  SECTION("many are counted, --node named as the source") {
    bed.opts.node = "gpu-node-1";
    std::vector<std::string> many;
    for (int i = 1; i <= 9; ++i) many.push_back("n" + std::to_string(i));
    bed.node_missing(many);
    Check c = check(bed);
    CHECK(c.code == "allocatable.no-node");
    CHECK(c.summary ==
          "node gpu-node-1 (--node) is not in the cluster (it has 9 nodes: "
          "n1, n2, n3, n4, n5, n6, n7, n8, ...)");
  }
}

TEST_CASE("allocatable: what stops the check before it can count",
          "[cluster-stage][allocatable]") {
  ClusterBed bed;
  healthy(bed, 1);
  SECTION("the API server fails: the cluster's code") {
    bed.kube().answer_status(KubeVerb::kGet, bed.node_path(), 500,
                             "etcdserver: request timed out");
    Check c = check(bed);
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == kClusterConnectionCode);
    CHECK_THAT(c.summary, Catch::Contains("etcdserver: request timed out"));
  }
  SECTION("listing the pods is forbidden: the cluster's code") {
    bed.kube().answer_status(KubeVerb::kList, bed.plugin_pods_path(), 403,
                             "pods is forbidden");
    Check c = check(bed);
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == kClusterConnectionCode);
    CHECK_THAT(c.summary, Catch::Contains("pods is forbidden"));
  }
  SECTION("a bad node name: the stage's own code") {
    bed.opts.node = "GPU_node";
    Check c = check(bed);
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "allocatable.blocked");
    CHECK(c.exit == ExitCode::kUsage);
  }
  SECTION("manifests that cannot be had: the stage's own code") {
    bed.bundle_unusable();
    Check c = check(bed);
    CHECK(c.code == "allocatable.blocked");
    CHECK_THAT(c.summary, Catch::Contains("no-such-bundle"));
  }
  SECTION("the GPU count unknown: the driver layer's reason") {
    bed.gpus_unknown();
    Check c = check(bed);
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "allocatable.blocked");
    CHECK_THAT(c.summary,
               Catch::StartsWith("cannot tell how many GPUs to expect: the "
                                 "NVIDIA kernel module is not loaded"));
    CHECK(bed.kube().requests().empty());
  }
}

// ---- the diagnosis, one case per branch (allocatable_stage.cpp diagnose)

TEST_CASE("allocatable diagnosis: DaemonSet missing -> plugin",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  bed.kube().put_absent(daemonset_path());
  Check c = waiting(bed);
  CHECK(c.summary == "node gpu-node-1 advertises nvidia.com/gpu: 0, not yet 1");
  CHECK(c.action ==
        "wait until node gpu-node-1 advertises nvidia.com/gpu: 1 (1 GPU x 1)");
  CHECK(c.cause == "plugin: the device plugin DaemonSet is not installed");
  CHECK(diagnosis(c) ==
        "[plugin] the device plugin DaemonSet is not installed; fix: gpunode "
        "install (without --skip plugin)");
}

TEST_CASE("allocatable diagnosis: reading the DaemonSet fails -> cluster",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  bed.kube().answer_status(KubeVerb::kGet, daemonset_path(), 403,
                           "daemonsets is forbidden");
  Check c = waiting(bed);
  CHECK_THAT(c.cause, Catch::StartsWith("cluster: GET " + daemonset_path()) &&
                          Catch::Contains("daemonsets is forbidden (403"));
  CHECK_THAT(diagnosis(c), Catch::Contains("; fix: use the cluster admin's"));
}

TEST_CASE("allocatable diagnosis: no pod, RuntimeClass event -> runtimeclass",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  bed.plugin_pods({});
  bed.events_about(
      kPluginDaemonSet,
      {{"FailedCreate",
        "Error creating: pods \"nvidia-device-plugin-daemonset-\" is "
        "forbidden: pod rejected: RuntimeClass \"nvidia\" not found"},
       {"FailedCreate", "a second line"}});
  Check c = waiting(bed);
  CHECK(c.cause ==
        "runtimeclass: the DaemonSet cannot create its pod: FailedCreate: "
        "Error creating: pods \"nvidia-device-plugin-daemonset-\" is "
        "forbidden: pod rejected: RuntimeClass \"nvidia\" not found");
  CHECK_THAT(diagnosis(c),
             Catch::EndsWith("fix: gpunode install (the runtimeclass stage "
                             "creates it)"));
}

TEST_CASE("allocatable diagnosis: no pod for another reason -> plugin",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  bed.plugin_pods({});
  SECTION("no events") {
    bed.events_about(kPluginDaemonSet, {});
    Check c = waiting(bed);
    CHECK(c.cause ==
          "plugin: no device plugin pod is scheduled on node gpu-node-1");
    CHECK_THAT(diagnosis(c),
               Catch::EndsWith("fix: kubectl -n kube-system describe "
                               "daemonset nvidia-device-plugin-daemonset"));
  }
  SECTION("the first event quoted") {
    bed.events_about(kPluginDaemonSet,
                     {{"FailedCreate", "exceeded quota: gpu-quota"}});
    Check c = waiting(bed);
    CHECK(c.cause ==
          "plugin: no device plugin pod is scheduled on node gpu-node-1: "
          "FailedCreate: exceeded quota: gpu-quota");
  }
}

TEST_CASE("allocatable diagnosis: the image cannot be pulled -> image",
          "[cluster-stage][allocatable][diagnosis]") {
  const std::string reason =
      GENERATE("ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull");
  ClusterBed bed;
  healthy(bed, 0);
  PluginPod pod;
  pod.phase = "Pending";
  pod.waiting_reason = reason;
  bed.plugin_pods({pod});
  Check c = waiting(bed);
  CHECK(c.cause == "image: plugin pod " + kPod + " is " + reason +
                       ": the image " + bed.opts.image_ref +
                       " is not in k3s's containerd, and this air-gapped "
                       "node can never pull it");
  CHECK_THAT(diagnosis(c),
             Catch::EndsWith("fix: gpunode install --image-archive <the "
                             "device plugin archive>"));
}

TEST_CASE("allocatable diagnosis: no runtime for \"nvidia\" -> handler",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  PluginPod pod;
  pod.phase = "Pending";
  pod.waiting_reason = "ContainerCreating";
  bed.plugin_pods({pod});
  bed.events_about(kPod, {{"FailedCreatePodSandBox",
                           "Failed to create pod sandbox: rpc error: code = "
                           "Unknown desc = failed to get sandbox runtime: no "
                           "runtime for \"nvidia\" is configured"}});
  Check c = waiting(bed);
  CHECK(c.cause == "handler: plugin pod " + kPod +
                       " cannot start: no runtime for \"nvidia\" is "
                       "configured (k3s started before the NVIDIA container "
                       "toolkit)");
  CHECK_THAT(diagnosis(c),
             Catch::EndsWith("fix: sudo systemctl restart k3s, or gpunode "
                             "install --restart-k3s"));
}

TEST_CASE("allocatable diagnosis: the config cannot be mounted -> plugin",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  PluginPod pod;
  pod.phase = "Pending";
  SECTION("CreateContainerConfigError, its message quoted") {
    pod.waiting_reason = "CreateContainerConfigError";
    pod.waiting_message = "configmap references non-existent config key";
    bed.plugin_pods({pod});
    Check c = waiting(bed);
    CHECK(c.cause == "plugin: plugin pod " + kPod +
                         " cannot mount its config: configmap references "
                         "non-existent config key");
    CHECK_THAT(diagnosis(c),
               Catch::EndsWith("fix: gpunode install (the plugin stage "
                               "applies the ConfigMap)"));
  }
  SECTION("a FailedMount event about the ConfigMap, quoted") {
    pod.waiting_reason = "ContainerCreating";
    bed.plugin_pods({pod});
    bed.events_about(kPod, {{"FailedMount",
                             "MountVolume.SetUp failed for volume "
                             "\"nvidia-device-plugin-config\" : configmap "
                             "\"nvidia-device-plugin-config\" not found"}});
    Check c = waiting(bed);
    CHECK_THAT(c.cause,
               Catch::StartsWith("plugin: plugin pod " + kPod +
                                 " cannot mount its config: FailedMount: "
                                 "MountVolume.SetUp failed"));
  }
}

TEST_CASE("allocatable diagnosis: crash-looping -> plugin, with its log",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  PluginPod pod;
  pod.waiting_reason = "CrashLoopBackOff";
  bed.plugin_pods({pod});
  SECTION("the log's last line") {
    bed.pod_log(kPod,
                "I1201 starting\nE1201 failed to start plugin: "
                "invalid config\n\n");
    Check c = waiting(bed);
    CHECK(c.cause == "plugin: plugin pod " + kPod +
                         " is crash-looping: E1201 failed to start plugin: "
                         "invalid config");
    CHECK_THAT(diagnosis(c),
               Catch::EndsWith("fix: kubectl -n kube-system logs " + kPod));
  }
  SECTION("no log to read") {
    bed.pod_log_unreadable(kPod);
    Check c = waiting(bed);
    CHECK(c.cause == "plugin: plugin pod " + kPod + " is crash-looping");
  }
}

TEST_CASE("allocatable diagnosis: a pod not Running -> plugin",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  PluginPod pod;
  pod.phase = "Pending";
  SECTION("with its waiting reason") {
    pod.waiting_reason = "ContainerCreating";
    bed.plugin_pods({pod});
    Check c = waiting(bed);
    CHECK(c.cause ==
          "plugin: plugin pod " + kPod + " is Pending (ContainerCreating)");
    CHECK_THAT(
        diagnosis(c),
        Catch::EndsWith("fix: kubectl -n kube-system describe pod " + kPod));
  }
  SECTION("without one") {
    bed.plugin_pods({pod});
    Check c = waiting(bed);
    CHECK(c.cause == "plugin: plugin pod " + kPod + " is Pending");
  }
}

TEST_CASE("allocatable diagnosis: no runtimeClassName -> plugin",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  PluginPod pod;
  pod.runtime_class = "";
  bed.plugin_pods({pod});
  Check c = waiting(bed);
  CHECK(c.cause == "plugin: plugin pod " + kPod +
                       " runs without runtimeClassName: under runc it cannot "
                       "load NVML and advertises no GPU");
  CHECK_THAT(diagnosis(c), Catch::Contains("fix: apply the platform's "
                                           "manifest (it sets "
                                           "runtimeClassName: nvidia)"));
}

TEST_CASE("allocatable diagnosis: the other resource name advertised -> plugin",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  SECTION("nvidia.com/gpu.shared where nvidia.com/gpu is wanted") {
    healthy(bed, 0);
    bed.node_advertises({{kShared, 4}});
    Check c = waiting(bed);
    CHECK(c.summary ==
          "node gpu-node-1 advertises nvidia.com/gpu: none, not yet 1");
    CHECK(c.cause ==
          "plugin: node advertises nvidia.com/gpu.shared: 4 but not "
          "nvidia.com/gpu: workloads asking for one will not schedule "
          "(renameByDefault)");
    CHECK_THAT(diagnosis(c), Catch::Contains("fix: use the same "
                                             "--rename-shared setting"));
  }
  SECTION("nvidia.com/gpu where nvidia.com/gpu.shared is wanted") {
    bed.sharing(Variant::kTimeSlicing, 2, true);
    healthy(bed, 2);  // nvidia.com/gpu: 2
    Check c = waiting(bed);
    CHECK_THAT(c.cause,
               Catch::StartsWith("plugin: node advertises nvidia.com/gpu: 2 "
                                 "but not nvidia.com/gpu.shared"));
  }
}

TEST_CASE("allocatable diagnosis: a pod of the previous config -> plugin",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 1);  // the count is right, but from the old config
  PluginPod pod;
  pod.config_hash = "sha256-of-the-previous-config";
  bed.plugin_pods({pod});
  Check c = waiting(bed);
  CHECK(c.summary == "node gpu-node-1 advertises nvidia.com/gpu: 1, not yet 1");
  CHECK(c.cause == "plugin: plugin pod " + kPod +
                       " still runs the previous config (the plugin reads "
                       "it only at start)");
  CHECK_THAT(diagnosis(c),
             Catch::EndsWith("fix: kubectl -n kube-system rollout restart "
                             "ds/nvidia-device-plugin-daemonset"));
}

TEST_CASE("allocatable diagnosis: running but advertising nothing",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed;
  healthy(bed, 0);
  SECTION("NVML in the log -> handler") {
    bed.pod_log(kPod,
                "I1201 Starting\nE1201 could not load NVML library: "
                "libnvidia-ml.so.1: cannot open shared object file\n");
    Check c = waiting(bed);
    CHECK(c.cause == "handler: plugin pod " + kPod +
                         " runs but advertises no GPU: E1201 could not load "
                         "NVML library: libnvidia-ml.so.1: cannot open "
                         "shared object file");
    CHECK_THAT(diagnosis(c),
               Catch::EndsWith("fix: check the handler layer: gpunode status "
                               "--only toolkit,handler"));
  }
  SECTION("another reason in the log -> plugin") {
    bed.pod_log(kPod, "I1201 No devices found. Waiting indefinitely.\n");
    Check c = waiting(bed);
    CHECK(c.cause == "plugin: plugin pod " + kPod +
                         " runs but advertises no GPU: I1201 No devices "
                         "found. Waiting indefinitely.");
    CHECK_THAT(diagnosis(c),
               Catch::EndsWith("fix: kubectl -n kube-system logs " + kPod));
  }
  SECTION("no log -> plugin") {
    bed.kube().answer_unreachable(KubeVerb::kGetText,
                                  ClusterBed::pod_log_path(kPod));
    Check c = waiting(bed);
    CHECK(c.cause ==
          "plugin: plugin pod " + kPod + " runs but advertises no GPU");
  }
}

TEST_CASE("allocatable diagnosis: fewer than wanted -> driver",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed(4);
  healthy(bed, 3);
  Check c = waiting(bed);
  CHECK(c.cause ==
        "driver: node advertises 3 of 4: a GPU is unhealthy or in MIG mode");
  CHECK_THAT(diagnosis(c),
             Catch::EndsWith("fix: nvidia-smi -q | grep -iE 'mig "
                             "mode|xid|retired'; gpunode status --only "
                             "driver"));
}

TEST_CASE(
    "allocatable diagnosis: fewer than wanted, and the kernel log "
    "names the GPU -> driver, naming it",
    "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed(4);
  healthy(bed, 3);
  // The derived log of an HGX board: Xid 79 on the GPU at PCI 0000:38:00,
  // which this host's inventory (one GPU, no bus id) cannot place.
  bed.proc().script("dmesg",
                    test::read_text(std::string(GPUNODE_TEST_FIXTURES) +
                                    "/gpu/derived/dmesg-xid-79.txt"));
  Check c = waiting(bed);
  CHECK(c.cause ==
        "driver: node advertises 3 of 4: the device plugin reports a GPU "
        "unhealthy: the GPU at PCI 0000:38:00 had Xid 79 (GPU has fallen off "
        "the bus) since boot: pid='<unknown>', name=<unknown>, GPU has "
        "fallen off the bus.");
  CHECK_THAT(diagnosis(c),
             Catch::Contains("fix: drain the node, reset the GPU"));
}

TEST_CASE("allocatable diagnosis: an application Xid is no reason",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed(4);
  healthy(bed, 3);
  bed.proc().script("dmesg",
                    "[ 10.0] NVRM: Xid (PCI:0000:38:00): 13, pid=1, name=x, "
                    "Graphics Exception\n");
  Check c = waiting(bed);
  CHECK(c.cause ==
        "driver: node advertises 3 of 4: a GPU is unhealthy or in MIG mode");
}

TEST_CASE("allocatable diagnosis: more than wanted -> plugin",
          "[cluster-stage][allocatable][diagnosis]") {
  ClusterBed bed(1);
  healthy(bed, 2);
  Check c = waiting(bed);
  CHECK(c.cause ==
        "plugin: node advertises 2, more than 1: another device plugin (or an "
        "old config) advertises too");
  CHECK_THAT(diagnosis(c), Catch::EndsWith("fix: kubectl get ds -A | grep -i "
                                           "device-plugin"));
}

TEST_CASE("allocatable diagnosis: nothing to blame while the pod is replaced",
          "[cluster-stage][allocatable][diagnosis]") {
  // The count is right and the only pod is current but being deleted: not
  // done, and no layer shows trouble. The wait goes on without a cause.
  ClusterBed bed;
  healthy(bed, 1);
  PluginPod pod;
  pod.deleting = true;
  bed.plugin_pods({pod});
  Check c = waiting(bed);
  CHECK(c.cause.empty());
  CHECK(c.details.empty());
}

// ---- apply ----

TEST_CASE("allocatable apply: the watch reaches the count with current pods",
          "[cluster-stage][allocatable]") {
  ClusterBed bed(2);
  healthy(bed, 0);
  bed.kube().answer_watch("/api/v1/nodes", node_stream(bed, {0, 1, 2}));
  auto stage = make_allocatable_stage();
  Check c = stage->check(bed.context());
  bed.kube().clear_requests();
  REQUIRE(stage->apply(bed.context(), c));
  std::vector<std::string> lines;
  for (const auto& r : bed.kube().requests()) lines.push_back(r.line());
  // The cluster's other GPU nodes are looked for first (there are none);
  // the pods are listed only once the count is there.
  CHECK(lines == std::vector<std::string>{
                     "LIST /api/v1/nodes",
                     "LIST " + ClusterBed::all_plugin_pods_path(),
                     "WATCH /api/v1/nodes (metadata.name=gpu-node-1)",
                     "LIST " + bed.plugin_pods_path()});
  CHECK(bed.kube().writes().empty());
}

TEST_CASE("allocatable apply: pods of the old config keep it waiting",
          "[cluster-stage][allocatable]") {
  // The old pods advertise the count too: only a pod of the current config
  // ends the wait. This one is never replaced.
  ClusterBed bed;
  healthy(bed, 1);
  PluginPod old;
  old.config_hash = "previous";
  bed.plugin_pods({old});
  bed.kube().answer_watch("/api/v1/nodes", node_stream(bed, {1}));
  const auto start = bed.clock().steady_now();
  auto applied = make_allocatable_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK(applied.error().exit == ExitCode::kTimeout);
  CHECK_THAT(applied.error().message,
             Catch::Contains("(it advertises 1); lowest broken layer: "
                             "[plugin] plugin pod " +
                             kPod + " still runs the previous config"));
  // The first pass ends as soon as the count shows, to confirm the pods;
  // once that fell short, relisted every 5 s until the 10-minute deadline,
  // the pods listed once a pass (and once more to say why it timed out).
  CHECK(bed.kube().count(KubeVerb::kWatch) == 121);
  CHECK(bed.kube().count(KubeVerb::kList, bed.plugin_pods_path()) == 122);
  CHECK(bed.clock().steady_now() - start == std::chrono::minutes(10));
}

TEST_CASE("allocatable apply: the deadline passes, naming the lowest layer",
          "[cluster-stage][allocatable]") {
  ClusterBed bed;
  bed.opts.timeout = std::chrono::seconds(20);
  healthy(bed, 0);
  PluginPod pod;
  pod.phase = "Pending";
  pod.waiting_reason = "ErrImageNeverPull";
  bed.plugin_pods({pod});
  bed.kube().answer_watch("/api/v1/nodes", node_stream(bed, {0}));
  auto stage = make_allocatable_stage();
  Context& ctx = bed.context();
  const auto deadline = ctx.deadline;
  auto applied = stage->apply(ctx, Check{});
  REQUIRE_FALSE(applied);
  CHECK(applied.error().exit == ExitCode::kTimeout);
  CHECK(applied.error().layer == "allocatable");
  CHECK(applied.error().message ==
        "node gpu-node-1 did not advertise nvidia.com/gpu: 1 before the "
        "deadline (it advertises 0); lowest broken layer: [image] plugin pod " +
            kPod + " is ErrImageNeverPull: the image " + bed.opts.image_ref +
            " is not in k3s's containerd, and this air-gapped node can never "
            "pull it");
  CHECK(applied.error().fix ==
        "gpunode install --image-archive <the device plugin archive>");
  // A watch per 5 s relist, each ending by the run's deadline.
  CHECK(bed.kube().count(KubeVerb::kWatch) == 4);
  for (const auto& r : bed.kube().requests()) {
    if (r.verb == KubeVerb::kWatch) CHECK(r.deadline <= deadline);
  }
  // The diagnosis after the deadline gets 10 s of its own; the run's
  // deadline is put back.
  const auto& last = bed.kube().requests().back();
  CHECK(last.deadline == deadline + std::chrono::seconds(10));
  CHECK(ctx.deadline == deadline);
}

TEST_CASE("allocatable apply: a deleted node is no answer, none seen",
          "[cluster-stage][allocatable]") {
  ClusterBed bed;
  bed.opts.timeout = std::chrono::seconds(5);
  healthy(bed, 1);
  bed.pod_log(kPod, "I1201 No devices found.\n");
  WatchStream deleted;
  deleted.events.push_back({"DELETED", bed.node_object({{kGpu, 1}})});
  bed.kube().answer_watch("/api/v1/nodes", deleted);
  auto applied = make_allocatable_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK(applied.error().exit == ExitCode::kTimeout);
  // No node seen: "none", and the diagnosis counts 0.
  CHECK_THAT(applied.error().message,
             Catch::Contains("before the deadline (it advertises none); "
                             "lowest broken layer: [plugin] plugin pod " +
                             kPod + " runs but advertises no GPU"));
  CHECK(bed.kube().count(KubeVerb::kList, bed.plugin_pods_path()) == 1);
}

TEST_CASE("allocatable apply: the deadline with nothing to blame",
          "[cluster-stage][allocatable]") {
  ClusterBed bed;
  bed.opts.timeout = std::chrono::seconds(5);
  healthy(bed, 1);
  PluginPod pod;
  pod.deleting = true;
  bed.plugin_pods({pod});
  bed.kube().answer_watch("/api/v1/nodes", node_stream(bed, {1}));
  auto applied = make_allocatable_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK(applied.error().exit == ExitCode::kTimeout);
  CHECK(applied.error().message ==
        "node gpu-node-1 did not advertise nvidia.com/gpu: 1 before the "
        "deadline (it advertises 1)");
  CHECK(applied.error().fix ==
        "kubectl -n kube-system describe pods -l name=nvidia-device-plugin-ds");
}

TEST_CASE("allocatable apply: pods that cannot be listed are the diagnosis",
          "[cluster-stage][allocatable][diagnosis]") {
  // Only the apply reaches this branch: the check lists the pods before
  // it diagnoses, and is blocked when it cannot.
  ClusterBed bed;
  bed.opts.timeout = std::chrono::seconds(5);
  healthy(bed, 0);
  bed.kube().answer_status(KubeVerb::kList, bed.plugin_pods_path(), 503,
                           "the server is currently unable to handle the "
                           "request");
  bed.kube().answer_watch("/api/v1/nodes", node_stream(bed, {0}));
  auto applied = make_allocatable_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK(applied.error().exit == ExitCode::kTimeout);
  CHECK_THAT(applied.error().message,
             Catch::Contains("(it advertises 0); lowest broken layer: "
                             "[cluster] GET /api/v1/namespaces/kube-system/"
                             "pods: the server is currently unable"));
}

TEST_CASE("allocatable apply: without a GPU count it does not wait",
          "[cluster-stage][allocatable]") {
  ClusterBed bed;
  bed.gpus_unknown();
  auto applied = make_allocatable_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK(applied.error().layer == "allocatable");
  CHECK_THAT(applied.error().message,
             Catch::StartsWith("cannot tell how many GPUs to expect"));
  CHECK(bed.kube().requests().empty());
}

TEST_CASE("allocatable apply: a cluster found down is not waited on",
          "[cluster-stage][allocatable]") {
  ClusterBed bed;
  bed.cluster_down();
  auto applied = make_allocatable_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK(applied.error().layer == "cluster");
  CHECK(bed.kube().requests().empty());
}

TEST_CASE("allocatable apply: what ends the wait early is returned as is",
          "[cluster-stage][allocatable]") {
  ClusterBed bed;
  healthy(bed, 1);
  SECTION("listing the pods fails once the count is there") {
    const Error forbidden = FakeKubeClient::status_error(
        KubeVerb::kList, bed.plugin_pods_path(), 403, "pods is forbidden");
    bed.kube().answer_error(KubeVerb::kList, bed.plugin_pods_path(), forbidden);
    bed.kube().answer_watch("/api/v1/nodes", node_stream(bed, {1}));
    auto applied = make_allocatable_stage()->apply(bed.context(), Check{});
    REQUIRE_FALSE(applied);
    CHECK(applied.error().message == forbidden.message);
    CHECK(bed.kube().count(KubeVerb::kWatch) == 1);
  }
  SECTION("the watch fails for another reason than time") {
    WatchStream broken;
    broken.end = FakeKubeClient::status_error(KubeVerb::kWatch, "/api/v1/nodes",
                                              403, "nodes is forbidden");
    bed.kube().answer_watch("/api/v1/nodes", broken);
    auto applied = make_allocatable_stage()->apply(bed.context(), Check{});
    REQUIRE_FALSE(applied);
    CHECK(applied.error().exit == ExitCode::kBlocked);
    CHECK_THAT(applied.error().message, Catch::Contains("nodes is forbidden"));
    CHECK(bed.kube().count(KubeVerb::kWatch) == 1);
  }
}

}  // namespace gpunode
