// The smoke stage's fast failures, end to end: the real gpunode binary
// against the simulated k3s node, whose kubelet cannot pull (air-gapped)
// and whose scheduler counts the slots pods hold. Each cause must end the
// run in far less than --timeout, naming its layer.
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "sim_gpu_node.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

using Node = SimGpuNode;
using std::chrono::steady_clock;

constexpr const char* kTimeout = "120s";

// A Pod holding the node's one GPU slot: bound by the scheduler, then
// stuck pulling an image that is not there (it keeps the slot all along).
const char* kHolder =
    "apiVersion: v1\n"
    "kind: Pod\n"
    "metadata:\n"
    "  name: holder\n"
    "  namespace: default\n"
    "spec:\n"
    "  runtimeClassName: nvidia\n"
    "  tolerations:\n"
    "  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n"
    "  containers:\n"
    "  - name: train\n"
    "    image: registry.example/train:1\n"
    "    resources:\n"
    "      limits:\n"
    "        nvidia.com/gpu: 1\n";

struct Timed {
  Run run;
  double seconds = 0;
};

Timed smoke(Node& node) {
  const auto t0 = steady_clock::now();
  Timed t;
  t.run = node.install({"--smoke", "--timeout", kTimeout, "--json"});
  t.seconds = std::chrono::duration<double>(steady_clock::now() - t0).count();
  return t;
}

// The smoke stage's JSON event (the check after its apply), or null.
json smoke_event(const Run& r) { return last_stage_event(r.out, "smoke"); }

// The smoke stage's event of a run that failed, naming `layer`.
json failed_smoke(const Run& r, const std::string& layer) {
  CHECK(r.exit_code == 1);
  const json e = smoke_event(r);
  REQUIRE(e.is_object());
  CHECK(e["facts"]["layer"] == layer);
  return e;
}

bool has_event(const json& facts, const std::string& reason) {
  for (const auto& e : facts.value("events", json::array()))
    if (e.value("reason", "") == reason) return true;
  return false;
}

}  // namespace

TEST_CASE("smoke e2e: the CUDA image not on the node fails fast, layer image",
          "[e2e][cluster][smoke]") {
  REQUIRE_PARTS();
  Node node;  // the device plugin's image only: no cuda-sample imported
  Timed t = smoke(node);
  INFO(t.run.err);
  const json e = failed_smoke(t.run, "image");
  CHECK_THAT(e.value("summary", ""),
             Catch::StartsWith("image: the CUDA Pod gpunode-smoke-"));
  CHECK_THAT(e.value("summary", ""),
             Catch::Contains("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-"
                             "cuda12.5.0 is not in k3s's containerd there"));
  // The node the Pod was scheduled on, in the message, the fix and a field.
  CHECK_THAT(e.value("summary", ""),
             Catch::Contains("is ErrImagePull on node gpu-node-1: ") ||
                 Catch::Contains("is ImagePullBackOff on node gpu-node-1: "));
  CHECK(e["facts"]["node"] == "gpu-node-1");
  CHECK_THAT(e.value("fix", ""),
             Catch::StartsWith("on node gpu-node-1: ") &&
                 Catch::Contains("sudo k3s ctr -n k8s.io images import"));
  // The kubelet's pull failure, as the Pod's events said it.
  CHECK(has_event(e["facts"], "Failed"));
  CHECK_THAT(t.run.err, Catch::Contains("event Warning Failed: Failed to "
                                        "pull image"));
  // Far less than the 120 s of --timeout (figure in the test's output).
  WARN("missing image: gpunode install --smoke took " << t.seconds << " s");
  CHECK(t.seconds < 30);
  // Deleted on this path too.
  CHECK(node.kubectl({"get", "pods", "-o", "name"}).out.find("gpunode-smoke") ==
        std::string::npos);
}

TEST_CASE("smoke e2e: no free slot fails after the grace, layer allocatable",
          "[e2e][cluster][smoke]") {
  REQUIRE_PARTS();
  Node node;
  REQUIRE(node.install().exit_code == 0);
  const std::string holder = node.dir.path() + "/holder.yml";
  write_text(holder, kHolder);
  REQUIRE(node.kubectl({"apply", "-f", holder}).exit_code == 0);
  // Bound first, so the slot is taken when the smoke Pod asks.
  const auto until = steady_clock::now() + std::chrono::seconds(20);
  while (node.sim->object("/api/v1/namespaces/default/pods/holder")["spec"]
             .value("nodeName", "")
             .empty() &&
         steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Timed t = smoke(node);
  INFO(t.run.err);
  const json e = failed_smoke(t.run, "allocatable");
  CHECK_THAT(e.value("summary", ""),
             Catch::Contains("no free nvidia.com/gpu slot for the CUDA Pod"));
  CHECK_THAT(e.value("summary", ""),
             Catch::Contains("0/1 nodes are available: 1 Insufficient "
                             "nvidia.com/gpu."));
  CHECK_THAT(e.value("fix", ""),
             Catch::Contains("kubectl describe node gpu-node-1"));
  CHECK(has_event(e["facts"], "FailedScheduling"));
  WARN("no free slot: gpunode install --smoke took " << t.seconds << " s");
  CHECK(t.seconds < 40);
  CHECK(node.kubectl({"get", "pods", "-o", "name"}).out.find("gpunode-smoke") ==
        std::string::npos);
}

// The image event of a run: the last one (the check after its apply).
json image_event(const Run& r) { return last_stage_event(r.out, "image"); }

TEST_CASE(
    "smoke e2e: install --smoke imports the bundle's CUDA sample, verified "
    "and pinned, and the smoke Pod passes",
    "[e2e][cluster][smoke][bundle]") {
  REQUIRE_PARTS();
  Node node;
  const std::string sample = node.cuda_sample_archive();
  const std::string bundle = node.dir.path() + "/usb/gpunode-bundle";
  write_text(node.dir.path() + "/usb/.keep", "");
  Run made = run_gpunode({"bundle", "create", "--out", bundle,
                          "--image-archive", node.archive, "--image-archive",
                          sample, "--created", "2026-11-29T00:00:00Z"});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const std::string ref = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0";
  std::vector<std::string> install{
      "install",   "--bundle", bundle,  "--insecure-skip-signature",
      "--timeout", kTimeout,   "--json"};
  SECTION("without --smoke the CUDA sample stays on the stick") {
    Run r = node.gpunode(install);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(image_event(r)["facts"]["smoke_image"].is_null());
    CHECK(node.ctd.ctr({"images", "ls", "-q", "name==" + ref}).out == "");
  }
  SECTION("with --smoke it is imported, pinned, and used") {
    install.push_back("--smoke");
    Run r = node.gpunode(install);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(smoke_event(r)["facts"]["result"] == "passed");
    const json facts = image_event(r)["facts"];
    CHECK(facts["smoke_image"]["ref"] == ref);
    CHECK(facts["smoke_image"]["pinned"] == true);
    CHECK(facts["smoke_image"]["archive"] ==
          bundle + "/images/cuda-sample-vectoradd-cuda12.5.0.tar");
    CHECK(node.ctd
              .ctr({"images", "ls", "-q",
                    "name==" + ref +
                        ",labels.\"io.cri-containerd.pinned\"==pinned"})
              .out == ref + "\n");
    // Converged: the next run imports nothing.
    Run again = node.gpunode(install);
    INFO(again.err);
    CHECK(again.exit_code == 0);
    CHECK(again.err.find("[image]        ok") != std::string::npos);
  }
}

TEST_CASE(
    "smoke e2e: --smoke with a bundle that lacks the CUDA sample installs the "
    "device plugin, warns, and the smoke fix names bundle create --pull",
    "[e2e][cluster][smoke][bundle]") {
  REQUIRE_PARTS();
  Node node;
  const std::string bundle = node.dir.path() + "/usb/gpunode-bundle";
  write_text(node.dir.path() + "/usb/.keep", "");
  Run made =
      run_gpunode({"bundle", "create", "--out", bundle, "--image-archive",
                   node.archive, "--created", "2026-11-29T00:00:00Z"});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  Run r =
      node.gpunode({"install", "--bundle", bundle, "--insecure-skip-signature",
                    "--smoke", "--timeout", kTimeout, "--json"});
  INFO(r.err);
  const json e = failed_smoke(r, "image");
  CHECK_THAT(e.value("fix", ""),
             Catch::Contains("gpunode bundle create --pull "
                             "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-"
                             "cuda12.5.0"));
  const json image = image_event(r);
  CHECK(image["status"] == "applied");
  CHECK(image["facts"]["image"]["pinned"] == true);
  CHECK(image["facts"]["smoke_image"]["digest"].is_null());
  CHECK_THAT(r.err, Catch::Contains("the smoke Pod cannot start"));
}
