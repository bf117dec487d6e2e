// The smoke stage against a FakeKubeClient: it always asks to run, runs a
// CUDA Pod (created, watched to its end, its log read) and deletes the Pod
// whatever happened.
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

// CREATE, WATCH, log, DELETE: the requests of one run of the Pod.
std::vector<std::string> expected_lines(const std::string& name) {
  return {"CREATE " + kPods, "WATCH " + kPods + " (metadata.name=" + name + ")",
          "GET_TEXT " + kPods + "/" + name + "/log",
          "DELETE " + kPods + "/" + name};
}

std::vector<std::string> lines(ClusterBed& bed) {
  std::vector<std::string> out;
  for (const auto& r : bed.kube().requests()) out.push_back(r.line());
  return out;
}

}  // namespace

TEST_CASE("smoke: asked for, it always runs", "[cluster-stage][smoke]") {
  ClusterBed bed;
  Check c = make_smoke_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "smoke.run");
  CHECK(c.action == "run " + bed.opts.smoke_image +
                        " in a Pod with runtimeClassName nvidia and "
                        "nvidia.com/gpu: 1, read its log, delete it");
  CHECK(bed.kube().requests().empty());
}

TEST_CASE("smoke: manifests that cannot be had block it",
          "[cluster-stage][smoke]") {
  ClusterBed bed;
  bed.bundle_unusable();
  Check c = make_smoke_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "smoke.render");
  CHECK_THAT(c.summary, Catch::Contains("no-such-bundle"));
}

TEST_CASE("smoke: a renamed resource is what the Pod asks for",
          "[cluster-stage][smoke]") {
  ClusterBed bed;
  bed.sharing(Variant::kTimeSlicing, 2, true);
  Check c = make_smoke_stage()->check(bed.context());
  CHECK_THAT(c.action, Catch::Contains("and nvidia.com/gpu.shared: 1,"));
}

TEST_CASE("smoke: a Pod that passes is deleted and the stage satisfied",
          "[cluster-stage][smoke]") {
  ClusterBed bed;
  bed.kube().answer_watch(kPods, phases({"Pending", "Running", "Succeeded"}));
  bed.kube().answer_text(kPods + "/*/log",
                         "[Vector addition of 50000 elements]\nCopy input "
                         "data\nTest PASSED\nDone\n");
  auto stage = make_smoke_stage();
  Check c = stage->check(bed.context());
  REQUIRE(stage->apply(bed.context(), c));
  const std::string name = created_name(bed);
  CHECK_THAT(name, Catch::StartsWith("gpunode-smoke-"));
  CHECK(lines(bed) == expected_lines(name));
  // The Pod as created: the RuntimeClass, one slot, never restarted.
  const kube::json& pod = bed.kube().requests()[0].body;
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
        "CUDA Pod " + name + " ran on a GPU slot: Test PASSED (Pod deleted)");
}

TEST_CASE("smoke: a Pod that fails is reported, and still deleted",
          "[cluster-stage][smoke]") {
  ClusterBed bed;
  auto stage = make_smoke_stage();
  SECTION("Failed, its log quoted") {
    bed.kube().answer_watch(kPods, phases({"Pending", "Failed"}));
    bed.kube().answer_text(kPods + "/*/log",
                           "Failed to allocate device vector A (error code "
                           "CUDA driver version is insufficient)!\n");
    auto applied = stage->apply(bed.context(), Check{});
    REQUIRE_FALSE(applied);
    const std::string name = created_name(bed);
    CHECK(applied.error().exit == ExitCode::kBlocked);
    CHECK(applied.error().layer == "smoke");
    CHECK(applied.error().message ==
          "the CUDA Pod " + name +
              " ended Failed without \"Test PASSED\": Failed to allocate "
              "device vector A (error code CUDA driver version is "
              "insufficient)!\n");
    CHECK(lines(bed) == expected_lines(name));
  }
  SECTION("Succeeded without the words") {
    bed.kube().answer_watch(kPods, phases({"Succeeded"}));
    bed.kube().answer_text(kPods + "/*/log", "Done\n");
    auto applied = stage->apply(bed.context(), Check{});
    REQUIRE_FALSE(applied);
    const std::string name = created_name(bed);
    CHECK_THAT(applied.error().message,
               Catch::Contains("ended Succeeded without \"Test PASSED\": "
                               "Done"));
    CHECK(lines(bed) == expected_lines(name));
  }
  SECTION("never scheduled: the deadline, with the scheduler's reason") {
    bed.opts.timeout = std::chrono::seconds(30);
    WatchStream pending;
    pending.events.push_back(
        {"ADDED",
         pod_in("Pending",
                "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")});
    bed.kube().answer_watch(kPods, pending);
    bed.kube().answer_error(
        KubeVerb::kGetText, kPods + "/*/log",
        FakeKubeClient::status_error(KubeVerb::kGetText, kPods + "/x/log", 400,
                                     "container \"cuda\" in pod is waiting "
                                     "to start"));
    auto applied = stage->apply(bed.context(), Check{});
    REQUIRE_FALSE(applied);
    const std::string name = created_name(bed);
    CHECK(applied.error().exit == ExitCode::kTimeout);
    CHECK(applied.error().message ==
          "the CUDA Pod " + name +
              " did not finish (phase Pending): 0/1 nodes are available: 1 "
              "Insufficient nvidia.com/gpu.");
    CHECK(lines(bed) == expected_lines(name));
    // The run's time is spent: the delete gets 10 s of its own.
    const auto& del = bed.kube().requests().back();
    CHECK(del.deadline == bed.clock().steady_now() + std::chrono::seconds(10));
  }
  SECTION("the watch refused") {
    bed.kube().answer_status(KubeVerb::kWatch, kPods, 403, "pods is forbidden");
    bed.kube().answer_text(kPods + "/*/log", "");
    auto applied = stage->apply(bed.context(), Check{});
    REQUIRE_FALSE(applied);
    const std::string name = created_name(bed);
    CHECK(applied.error().exit == ExitCode::kBlocked);
    CHECK(applied.error().message ==
          "the CUDA Pod " + name + " did not finish (phase unknown)");
    CHECK(lines(bed) == expected_lines(name));
  }
  // A failed run leaves the stage needed.
  CHECK(stage->check(bed.context()).status == CheckStatus::kNeeded);
}

TEST_CASE("smoke: no Pod without a cluster or manifests",
          "[cluster-stage][smoke]") {
  ClusterBed bed;
  SECTION("the cluster found down") { bed.cluster_down(); }
  SECTION("manifests that cannot be had") { bed.bundle_unusable(); }
  auto applied = make_smoke_stage()->apply(bed.context(), Check{});
  REQUIRE_FALSE(applied);
  CHECK(bed.kube().requests().empty());
}

TEST_CASE("smoke: a Pod that cannot be created: nothing to delete",
          "[cluster-stage][smoke]") {
  ClusterBed bed;
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
  ClusterBed bed;
  bed.kube().answer_watch(kPods, phases({"Pending", "Succeeded"}));
  bed.kube().answer_text(kPods + "/*/log", "Test PASSED\n");
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

}  // namespace gpunode
