// The smoke stage against a FakeKubeClient: it always asks to run, runs a
// proof Pod per GPU of each GPU node (created, watched to its end, its log
// read) and deletes each Pod whatever happened. The bed's node has one GPU
// and one free slot: one proof Pod.
#include <array>
#include <catch2/catch.hpp>

#include "cluster_bed.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using test::ClusterBed;
using test::FakeKubeClient;
using test::KubeVerb;
using test::WatchStream;

const std::string kPods = "/api/v1/namespaces/default/pods";
const std::string kEvents =
    "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D";

// What a proof Pod on the bed's GPU prints before the sample's own lines.
const std::string kMark =
    "gpunode-proof gpu=GPU-00000000-0000-0000-0000-000000000000\n";

// The bed's node, a GPU node with one slot, no Pods on it yet.
struct ProofBed : ClusterBed {
  ProofBed() {
    node_advertises({{"nvidia.com/gpu", 1}});
    kube().answer_list("/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-node-1",
                       {});
  }
};

kube::json pod_in(const std::string& phase,
                  const std::string& unschedulable = "") {
  kube::json pod = {{"metadata", {{"namespace", "default"}}},
                    {"status", {{"phase", phase}}}};
  if (!unschedulable.empty()) {
    pod["status"]["conditions"] =
        kube::json::array({{{"type", "PodScheduled"},
                            {"status", "False"},
                            {"reason", "Unschedulable"},
                            {"message", unschedulable}}});
  }
  return pod;
}

WatchStream phases(const std::vector<std::string>& seen) {
  WatchStream s;
  for (const auto& phase : seen)
    s.events.push_back(
        {s.events.empty() ? "ADDED" : "MODIFIED", pod_in(phase)});
  return s;
}

// The Pod's name, from the CREATE the stage sent.
std::string created_name(ClusterBed& bed) {
  for (const auto& r : bed.kube().requests()) {
    if (r.verb == KubeVerb::kCreate) return r.body["metadata"]["name"];
  }
  FAIL("no CREATE was sent");
  return {};
}

// CREATE, WATCH, its events, log, DELETE: the requests of one run of the
// Pod that ended in the first slice of its watch.
std::vector<std::string> expected_lines(const std::string& name) {
  return {"CREATE " + kPods, "WATCH " + kPods + " (metadata.name=" + name + ")",
          "LIST " + kEvents + name, "GET_TEXT " + kPods + "/" + name + "/log",
          "DELETE " + kPods + "/" + name};
}

// The requests from the first CREATE on (before it: the GPU nodes listed,
// the node's free slots read).
std::vector<std::string> lines(ClusterBed& bed) {
  std::vector<std::string> out;
  for (const auto& r : bed.kube().requests())
    if (!out.empty() || r.verb == KubeVerb::kCreate) out.push_back(r.line());
  return out;
}

// A Pending Pod whose cuda container waits for `reason`.
kube::json waiting_pod(const std::string& reason, const std::string& message) {
  kube::json pod = pod_in("Pending");
  pod["status"]["containerStatuses"] = kube::json::array(
      {{{"name", "cuda"},
        {"state", {{"waiting", {{"reason", reason}, {"message", message}}}}}}});
  return pod;
}

// A watch that sees `pod` and then nothing until its deadline.
WatchStream stuck(const kube::json& pod) {
  WatchStream s;
  s.events.push_back({"ADDED", pod});
  return s;
}

// The Pod's events, as the API server lists them for any smoke Pod.
void events(
    ClusterBed& bed,
    const std::vector<std::array<std::string, 3>>& type_reason_message) {
  std::vector<kube::json> items;
  for (const auto& [type, reason, message] : type_reason_message) {
    items.push_back({{"type", type}, {"reason", reason}, {"message", message}});
  }
  bed.kube().answer_list(kEvents + "*", items);
}

// One run of the stage (apply, then its check), as the runner does it.
struct Ran {
  std::string pod;
  Check check;
};
Ran run_smoke(ClusterBed& bed) {
  auto stage = make_smoke_stage();
  REQUIRE(stage->apply(bed.context(), Check{}));
  Ran ran{created_name(bed), stage->check(bed.context())};
  return ran;
}

}  // namespace

TEST_CASE("smoke: asked for, it always runs", "[cluster-stage][smoke]") {
  ProofBed bed;
  Check c = make_smoke_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "smoke.run");
  CHECK(c.action == "run " + bed.opts.smoke_image +
                        " in Pods with runtimeClassName nvidia and "
                        "nvidia.com/gpu: 1 on every GPU of every GPU node, "
                        "read their logs, delete them");
  CHECK(bed.kube().requests().empty());
}

TEST_CASE("smoke: manifests that cannot be had block it",
          "[cluster-stage][smoke]") {
  ProofBed bed;
  bed.bundle_unusable();
  Check c = make_smoke_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "smoke.render");
  CHECK_THAT(c.summary, Catch::Contains("no-such-bundle"));
}

TEST_CASE("smoke: a renamed resource is what the Pod asks for",
          "[cluster-stage][smoke]") {
  ProofBed bed;
  bed.sharing(Variant::kTimeSlicing, 2, true);
  Check c = make_smoke_stage()->check(bed.context());
  CHECK_THAT(c.action,
             Catch::Contains("and nvidia.com/gpu.shared: 1 on every GPU"));
}

TEST_CASE("smoke: a Pod that passes is deleted and the stage satisfied",
          "[cluster-stage][smoke]") {
  ProofBed bed;
  bed.kube().answer_watch(kPods, phases({"Pending", "Running", "Succeeded"}));
  bed.kube().answer_text(kPods + "/*/log",
                         kMark +
                             "[Vector addition of 50000 elements]\nCopy input "
                             "data\nTest PASSED\nDone\n");
  auto stage = make_smoke_stage();
  Check c = stage->check(bed.context());
  REQUIRE(stage->apply(bed.context(), c));
  const std::string name = created_name(bed);
  CHECK_THAT(name, Catch::StartsWith("gpunode-smoke-"));
  CHECK(lines(bed) == expected_lines(name));
  // The Pod as created: the RuntimeClass, one slot, never restarted.
  kube::json pod;
  for (const auto& r : bed.kube().requests())
    if (r.verb == KubeVerb::kCreate) pod = r.body;
  CHECK(pod["spec"]["runtimeClassName"] == "nvidia");
  CHECK(pod["spec"]["restartPolicy"] == "Never");
  CHECK(pod["spec"]["containers"][0]["image"] == bed.opts.smoke_image);
  CHECK(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] ==
        1);
  CHECK(pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpunode");
  CHECK_FALSE(bed.kube().stored(kPods + "/" + name));
  Check after = stage->check(bed.context());
  CHECK(after.status == CheckStatus::kSatisfied);
  CHECK(after.code == "smoke.ok");
  CHECK(after.summary ==
        "every GPU passed the CUDA sample: 1 GPU(s) on 1 node(s), 1 Pod(s), "
        "deleted; DCGM is not installed on this host (no dcgmi): not run");
}

TEST_CASE("smoke: a Pod that fails is reported by the check, and still deleted",
          "[cluster-stage][smoke]") {
  ProofBed bed;
  auto stage = make_smoke_stage();
  SECTION("Failed, its log quoted") {
    bed.kube().answer_watch(kPods, phases({"Pending", "Failed"}));
    bed.kube().answer_text(kPods + "/*/log",
                           "Failed to allocate device vector A (error code "
                           "CUDA driver version is insufficient)!\n");
    REQUIRE(stage->apply(bed.context(), Check{}));
    const std::string name = created_name(bed);
    Check c = stage->check(bed.context());
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.exit == ExitCode::kBlocked);
    CHECK(c.code == "smoke.failed");
    CHECK(c.facts["layer"] == "smoke");
    CHECK(c.summary ==
          "smoke: the CUDA Pod " + name +
              " ended Failed without \"Test PASSED\": Failed to allocate "
              "device vector A (error code CUDA driver version is "
              "insufficient)!");
    CHECK(c.fix == "gpunode status (every layer below must be satisfied)");
    CHECK(lines(bed) == expected_lines(name));
  }
  SECTION("Succeeded without the words") {
    bed.kube().answer_watch(kPods, phases({"Succeeded"}));
    bed.kube().answer_text(kPods + "/*/log", "Done\n");
    REQUIRE(stage->apply(bed.context(), Check{}));
    const std::string name = created_name(bed);
    CHECK_THAT(stage->check(bed.context()).summary,
               Catch::Contains("ended Succeeded without \"Test PASSED\": "
                               "Done"));
    CHECK(lines(bed) == expected_lines(name));
  }
  SECTION("never finished: the deadline, with what the Pod last said") {
    bed.opts.timeout = std::chrono::seconds(5);
    WatchStream pending;
    kube::json pod = pod_in("Pending");
    pod["status"]["conditions"] = kube::json::array(
        {{{"type", "Ready"},
          {"status", "False"},
          {"reason", "ContainersNotReady"},
          {"message", "containers with unready status: [cuda]"}}});
    pending.events.push_back({"ADDED", pod});
    bed.kube().answer_watch(kPods, pending);
    bed.kube().answer_error(
        KubeVerb::kGetText, kPods + "/*/log",
        FakeKubeClient::status_error(KubeVerb::kGetText, kPods + "/x/log", 400,
                                     "container \"cuda\" in pod is waiting "
                                     "to start"));
    REQUIRE(stage->apply(bed.context(), Check{}));
    const std::string name = created_name(bed);
    Check c = stage->check(bed.context());
    CHECK(c.exit == ExitCode::kTimeout);
    CHECK(c.code == "smoke.unfinished");
    CHECK(c.summary == "smoke: the CUDA Pod " + name +
                           " did not finish (phase Pending): containers with "
                           "unready status: [cuda]");
    // Slices of 2 s, the events read after each but the last.
    const std::string watch =
        "WATCH " + kPods + " (metadata.name=" + name + ")";
    const std::string events = "LIST " + kEvents + name;
    CHECK(lines(bed) ==
          std::vector<std::string>{"CREATE " + kPods, watch, events, watch,
                                   events, watch, events,
                                   "GET_TEXT " + kPods + "/" + name + "/log",
                                   "DELETE " + kPods + "/" + name});
    // The run's time is spent: the delete gets 10 s of its own.
    const auto& del = bed.kube().requests().back();
    CHECK(del.deadline == bed.clock().steady_now() + std::chrono::seconds(10));
  }
  SECTION("the watch refused") {
    bed.kube().answer_status(KubeVerb::kWatch, kPods, 403, "pods is forbidden");
    bed.kube().answer_text(kPods + "/*/log", "");
    REQUIRE(stage->apply(bed.context(), Check{}));
    const std::string name = created_name(bed);
    Check c = stage->check(bed.context());
    CHECK(c.exit == ExitCode::kBlocked);
    CHECK(c.summary ==
          "smoke: the CUDA Pod " + name + " did not finish (phase unknown)");
    CHECK(lines(bed) == expected_lines(name));
  }
}

TEST_CASE("smoke: no Pod without a cluster or manifests",
          "[cluster-stage][smoke]") {
  ProofBed bed;
  SECTION("the cluster found down") { bed.cluster_down(); }
  SECTION("manifests that cannot be had") { bed.bundle_unusable(); }
  auto applied = make_smoke_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK(bed.kube().requests().empty());
}

TEST_CASE("smoke: a Pod that cannot be created: nothing to delete",
          "[cluster-stage][smoke]") {
  ProofBed bed;
  bed.kube().answer_status(KubeVerb::kCreate, kPods, 403,
                           "pods is forbidden: exceeded quota");
  auto applied = make_smoke_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK_THAT(applied.error().message,
             Catch::StartsWith("POST " + kPods + ": the credentials"));
  CHECK(lines(bed) == std::vector<std::string>{"CREATE " + kPods});
}

TEST_CASE("smoke facts: the Pod, its image and the result as fields",
          "[cluster-stage][smoke][facts]") {
  ProofBed bed;
  bed.kube().answer_watch(kPods, phases({"Pending", "Succeeded"}));
  bed.kube().answer_text(kPods + "/*/log", kMark + "Test PASSED\n");
  auto stage = make_smoke_stage();
  Check before = stage->check(bed.context());
  CHECK(before.facts["pod"].is_null());
  CHECK(before.facts["image"] == bed.opts.smoke_image);
  CHECK(before.facts["result"].is_null());
  REQUIRE(stage->apply(bed.context(), before));
  Check after = stage->check(bed.context());
  REQUIRE(after.status == CheckStatus::kSatisfied);
  CHECK(after.facts["pod"] == created_name(bed));
  CHECK(after.facts["image"] == bed.opts.smoke_image);
  CHECK(after.facts["result"] == "passed");
}

TEST_CASE("smoke: an image not on the node ends the watch at once",
          "[cluster-stage][smoke][smoke-cause]") {
  ProofBed bed;
  bed.opts.timeout = std::chrono::seconds(300);
  std::string reason;
  SECTION("ErrImagePull") { reason = "ErrImagePull"; }
  SECTION("ImagePullBackOff") { reason = "ImagePullBackOff"; }
  SECTION("ErrImageNeverPull") { reason = "ErrImageNeverPull"; }
  // Scheduled on a GPU agent, not on the node gpunode runs on (a server's
  // run): the message and the fix send the operator there.
  kube::json pod = waiting_pod(reason, "Back-off pulling image");
  pod["spec"]["nodeName"] = "gpu-agent-7";
  bed.kube().answer_watch(kPods, stuck(pod));
  bed.kube().answer_text(kPods + "/*/log", "");
  const auto started = bed.clock().steady_now();
  const auto [name, c] = run_smoke(bed);
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "smoke.image");
  CHECK(c.facts["layer"] == "image");
  CHECK(c.facts["node"] == "gpu-agent-7");
  CHECK(c.summary == "image: the CUDA Pod " + name + " is " + reason +
                         " on node gpu-agent-7: the image " +
                         bed.opts.smoke_image +
                         " is not in k3s's containerd there, and an "
                         "air-gapped node will never pull it");
  // Without a bundle: what to import, by hand, on that node.
  CHECK(c.fix == "on node gpu-agent-7: import an archive of " +
                     bed.opts.smoke_image +
                     " into k3s's containerd: sudo k3s ctr -n k8s.io images "
                     "import FILE.tar (gpunode bundle create --pull " +
                     bed.opts.smoke_image + " puts one in a bundle's images/)");
  // The first sight ends it: the watch never ran into its slice's end.
  CHECK(bed.clock().steady_now() == started);
  CHECK(lines(bed) == expected_lines(name));
}

TEST_CASE("smoke: an image pull failure before the Pod names its node",
          "[cluster-stage][smoke][smoke-cause]") {
  ProofBed bed;
  bed.opts.timeout = std::chrono::seconds(300);
  bed.kube().answer_watch(
      kPods, stuck(waiting_pod("ErrImagePull", "pull access denied")));
  bed.kube().answer_text(kPods + "/*/log", "");
  const auto [name, c] = run_smoke(bed);
  CHECK(c.code == "smoke.image");
  CHECK(c.facts["node"].is_null());
  CHECK_THAT(c.summary,
             Catch::Contains(" on the node the Pod was scheduled on: "));
  CHECK_THAT(c.fix, Catch::StartsWith("on the node the Pod was scheduled on: "
                                      "import an archive of "));
}

TEST_CASE("smoke: a container waiting for another reason is waited for",
          "[cluster-stage][smoke][smoke-cause]") {
  ProofBed bed;
  bed.opts.timeout = std::chrono::seconds(4);
  bed.kube().answer_watch(kPods, stuck(waiting_pod("ContainerCreating", "")));
  bed.kube().answer_text(kPods + "/*/log", "");
  auto stage = make_smoke_stage();
  REQUIRE(stage->apply(bed.context(), Check{}));
  Check c = stage->check(bed.context());
  CHECK(c.code == "smoke.unfinished");
  CHECK(c.exit == ExitCode::kTimeout);
}

TEST_CASE("smoke: the RuntimeClass admission refusal names runtimeclass",
          "[cluster-stage][smoke][smoke-cause]") {
  ProofBed bed;
  bed.kube().answer_status(KubeVerb::kCreate, kPods, 403,
                           "pods \"gpunode-smoke-1\" is forbidden: pod "
                           "rejected: RuntimeClass \"nvidia\" not found");
  auto stage = make_smoke_stage();
  auto applied = stage->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK(applied.error().exit == ExitCode::kBlocked);
  CHECK(applied.error().layer == "runtimeclass");
  CHECK(applied.error().status == 403);
  CHECK(applied.error().message ==
        "the API server refused the CUDA Pod: RuntimeClass \"nvidia\" not "
        "found (the RuntimeClass admission plugin)");
  CHECK(applied.error().fix ==
        "gpunode install (the runtimeclass stage applies RuntimeClass nvidia; "
        "not with --skip runtimeclass)");
  // No Pod was made: none to delete, none to name.
  CHECK(lines(bed) == std::vector<std::string>{"CREATE " + kPods});
  CHECK(stage->check(bed.context()).facts["pod"].is_null());
}

TEST_CASE("smoke: a sandbox that cannot be made ends at the next events read",
          "[cluster-stage][smoke][smoke-cause]") {
  ProofBed bed;
  bed.opts.timeout = std::chrono::seconds(300);
  std::string message, code, layer, fix;
  SECTION("no runtime for nvidia: the handler") {
    message =
        "Failed to create pod sandbox: rpc error: code = Unknown desc = "
        "failed to get sandbox runtime: no runtime for \"nvidia\" is "
        "configured";
    code = "smoke.handler";
    layer = "handler";
    fix =
        "sudo systemctl restart k3s (so k3s finds the NVIDIA runtime), or "
        "gpunode install --restart-k3s";
  }
  SECTION("the RuntimeClass gone after admission") {
    message =
        "Failed to create pod sandbox: runtimeclass.node.k8s.io \"nvidia\" "
        "not found";
    code = "smoke.runtimeclass";
    layer = "runtimeclass";
    fix =
        "gpunode install (the runtimeclass stage applies RuntimeClass nvidia)";
  }
  SECTION("the runtime's binary missing: the toolkit") {
    message =
        "Failed to create pod sandbox: rpc error: code = Unknown desc = "
        "failed to create containerd task: fork/exec "
        "/usr/bin/nvidia-container-runtime: no such file or directory: "
        "unknown";
    code = "smoke.toolkit";
    layer = "toolkit";
    fix =
        "gpunode install (the toolkit stage installs the NVIDIA container "
        "toolkit)";
  }
  bed.kube().answer_watch(kPods, stuck(pod_in("Pending")));
  events(bed, {{"Normal", "Scheduled", "Successfully assigned"},
               {"Warning", "FailedCreatePodSandBox", message}});
  bed.kube().answer_text(kPods + "/*/log", "");
  const auto started = bed.clock().steady_now();
  const auto [name, c] = run_smoke(bed);
  CHECK(c.code == code);
  CHECK(c.facts["layer"] == layer);
  CHECK(c.summary ==
        layer + ": the CUDA Pod " + name + " gets no sandbox: " + message);
  CHECK(c.fix == fix);
  // One slice of the watch, not the 300 s of --timeout.
  CHECK(bed.clock().steady_now() - started == std::chrono::seconds(2));
  CHECK_FALSE(bed.kube().stored(kPods + "/" + name));
}

TEST_CASE("smoke: Unschedulable ends after its grace, naming the resource",
          "[cluster-stage][smoke][smoke-cause]") {
  ProofBed bed;
  bed.opts.timeout = std::chrono::seconds(300);
  std::string said, resource;
  SECTION("nvidia.com/gpu") {
    said =
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: "
        "0/1 nodes are available: 1 No preemption victims found for incoming "
        "pod.";
    resource = "nvidia.com/gpu";
  }
  SECTION("a renamed resource, among other reasons") {
    bed.sharing(Variant::kTimeSlicing, 2, true);
    said =
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu.shared, 1 "
        "node(s) had untolerated taint {node-role: infra}.";
    resource = "nvidia.com/gpu.shared";
  }
  bed.kube().answer_watch(kPods, stuck(pod_in("Pending", said)));
  events(bed, {{"Warning", "FailedScheduling", said}});
  bed.kube().answer_text(kPods + "/*/log", "");
  const auto started = bed.clock().steady_now();
  const auto [name, c] = run_smoke(bed);
  CHECK(c.code == "smoke.unschedulable");
  CHECK(c.facts["layer"] == "allocatable");
  CHECK(c.summary == "allocatable: no free " + resource +
                         " slot for the CUDA Pod " + name +
                         ": the scheduler says \"" + said + "\"");
  CHECK(c.fix == "see what holds the slots: kubectl describe node " +
                     bed.node() +
                     " (Allocated resources, Non-terminated Pods), or kubectl "
                     "get pods -A -o wide --field-selector spec.nodeName=" +
                     bed.node() +
                     "; end one, or share the GPUs (--variant time-slicing)");
  // 10 s of grace from the first sight, not the 300 s of --timeout.
  CHECK(bed.clock().steady_now() - started == std::chrono::seconds(10));
  CHECK_FALSE(bed.kube().stored(kPods + "/" + name));
}

TEST_CASE("smoke: a Pod the scheduler places within the grace runs on",
          "[cluster-stage][smoke][smoke-cause]") {
  ProofBed bed;
  // Unschedulable in the first watch, placed and done in the second.
  bed.kube().answer_watch(kPods, stuck(pod_in("Pending",
                                              "0/1 nodes are available: 1 "
                                              "Insufficient nvidia.com/gpu.")));
  bed.kube().answer_watch(kPods, phases({"Pending", "Running", "Succeeded"}));
  events(bed, {});
  bed.kube().answer_text(kPods + "/*/log", kMark + "Test PASSED\n");
  auto stage = make_smoke_stage();
  REQUIRE(stage->apply(bed.context(), Check{}));
  CHECK(stage->check(bed.context()).status == CheckStatus::kSatisfied);
}

TEST_CASE(
    "smoke: a container that exits non-zero: its exit code, the log's "
    "last lines",
    "[cluster-stage][smoke][smoke-cause]") {
  ProofBed bed;
  kube::json pod = pod_in("Failed");
  pod["status"]["containerStatuses"] = kube::json::array(
      {{{"name", "cuda"},
        {"state", {{"terminated", {{"exitCode", 1}, {"reason", "Error"}}}}}}});
  WatchStream s;
  s.events.push_back({"ADDED", pod});
  bed.kube().answer_watch(kPods, s);
  bed.kube().answer_text(kPods + "/*/log",
                         "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n"
                         "Failed to launch vectorAdd kernel (error code no "
                         "kernel image is available)!\n\n");
  const auto [name, c] = run_smoke(bed);
  CHECK(c.code == "smoke.failed");
  // Five lines, the newlines between them escaped for the terminal.
  CHECK(c.summary == "smoke: the CUDA Pod " + name +
                         " ended Failed (exit code 1) without \"Test "
                         "PASSED\": line 3\\nline 4\\nline 5\\nline 6\\n"
                         "Failed to launch vectorAdd kernel (error code no "
                         "kernel image is available)!");
}

TEST_CASE("smoke: the Pod's events, read before its deletion, in the report",
          "[cluster-stage][smoke][facts]") {
  ProofBed bed;
  bed.kube().answer_watch(kPods, phases({"Pending", "Succeeded"}));
  events(bed, {{"Normal", "Scheduled", "Successfully assigned default/x"},
               {"Warning", "Odd", "a forged\nline \x1b[2J"}});
  bed.kube().answer_text(kPods + "/*/log", kMark + "Test PASSED\n");
  auto stage = make_smoke_stage();
  CHECK(stage->check(bed.context()).facts["events"] == kube::json::array());
  REQUIRE(stage->apply(bed.context(), Check{}));
  const std::string name = created_name(bed);
  Check c = stage->check(bed.context());
  REQUIRE(c.status == CheckStatus::kSatisfied);
  CHECK(c.facts["events"] ==
        kube::json::array({{{"reason", "Scheduled"},
                            {"message", "Successfully assigned default/x"},
                            {"type", "Normal"}},
                           {{"reason", "Odd"},
                            {"message", "a forged\nline \x1b[2J"},
                            {"type", "Warning"}}}));
  REQUIRE(c.details.size() >= 2);
  CHECK(std::vector<std::string>(c.details.begin(), c.details.begin() + 2) ==
        std::vector<std::string>{
            "event Normal Scheduled: Successfully assigned default/x",
            "event Warning Odd: a forged\\nline \\e[2J"});
  // Read while the Pod was still there.
  const auto all = lines(bed);
  const auto listed =
      std::find(all.begin(), all.end(), "LIST " + kEvents + name);
  const auto deleted =
      std::find(all.begin(), all.end(), "DELETE " + kPods + "/" + name);
  REQUIRE(listed != all.end());
  CHECK(listed < deleted);
}

}  // namespace gpunode
