// The whole pipeline, end to end: the real gpunode binary against the
// simulated k3s node (HTTPS API with client certificates, watch, server-side
// apply, device plugin model) and a real containerd holding the images.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "containerd_fixture.hpp"
#include "k3s_sim.hpp"
#include "oci_builder.hpp"
#include "sim_gpu_node.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

using Node = SimGpuNode;

}  // namespace

TEST_CASE("both variants install from scratch to GPUs x replicas",
          "[e2e][cluster]") {
  REQUIRE_PARTS();
  SECTION("default: one slot per GPU") {
    Node node("good-v3", 2);
    Run r = node.install();
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(node.allocatable() == "2");
    CHECK(node.sim->object(kRcPath)["handler"] == "nvidia");
    CHECK(node.sim->object(kCmPath).is_null());
  }
  SECTION("time-slicing: 1 GPU x 8") {
    Node node;
    Run r = node.install({"--variant", "time-slicing"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(node.allocatable() == "8");
    CHECK_THAT(r.err, Catch::Contains("nvidia.com/gpu: 8 (1 GPU x 8)"));
  }
  SECTION(
      "time-slicing renamed: nvidia.com/gpu.shared, and the platform setting "
      "to change") {
    Node node;
    Run r = node.install(
        {"--variant", "time-slicing", "--replicas", "4", "--rename-shared"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(node.allocatable("nvidia.com/gpu.shared") == "4");
    CHECK_THAT(r.err,
               Catch::Contains(
                   "GEO_MLOPS_SERVING_GPU_RESOURCE=nvidia.com/gpu.shared"));
  }
}

TEST_CASE("a rerun with everything in place makes zero write requests",
          "[e2e][cluster]") {
  REQUIRE_PARTS();
  Node node;
  REQUIRE(node.install({"--variant", "time-slicing"}).exit_code == 0);
  node.sim->reset_stats();
  Run again = node.install({"--variant", "time-slicing"});
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(node.sim->stats()["writes"] == 0);
  CHECK(again.err.find("applying") == std::string::npos);
}

TEST_CASE(
    "switching variants both ways and changing replicas converge, pods "
    "restarted",
    "[e2e][cluster]") {
  REQUIRE_PARTS();
  Node node;
  REQUIRE(node.install().exit_code == 0);
  CHECK(node.allocatable() == "1");
  const std::string first_pod = node.plugin_pod();

  Run slicing = node.install({"--variant", "time-slicing"});
  INFO(slicing.err);
  REQUIRE(slicing.exit_code == 0);
  CHECK(node.allocatable() == "8");
  const std::string second_pod = node.plugin_pod();
  CHECK(second_pod != first_pod);

  Run four = node.install({"--variant", "time-slicing", "--replicas", "4"});
  INFO(four.err);
  REQUIRE(four.exit_code == 0);
  CHECK(node.allocatable() == "4");
  CHECK(node.plugin_pod() !=
        second_pod);  // restarted without `rollout restart`

  Run back = node.install();
  INFO(back.err);
  REQUIRE(back.exit_code == 0);
  CHECK(node.allocatable() == "1");
  CHECK(node.sim->object(kCmPath).is_null());  // the stale ConfigMap is gone
}

TEST_CASE("another NVIDIA device plugin is refused unless --replace-existing",
          "[e2e][cluster]") {
  REQUIRE_PARTS();
  Node node;
  // Seed 004's node: Helm release nvdp in namespace nvidia-device-plugin.
  const std::string other = node.dir.path() + "/nvdp.yaml";
  write_text(other, helm_device_plugin_yaml());
  Run applied = node.kubectl({"apply", "--server-side", "-f", other});
  REQUIRE(applied.exit_code == 0);
  node.sim->reset_stats();
  Run refused = node.install();
  INFO(refused.err);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("Helm release nvdp"));
  CHECK_THAT(refused.err, Catch::Contains("--replace-existing"));
  CHECK_THAT(refused.err,
             Catch::Contains("GEO_MLOPS_KUBERNETES_DEVICE_PLUGIN_NAMESPACE"));
  CHECK(node.sim->object(kDsPath).is_null());

  Run replaced = node.install({"--replace-existing"});
  INFO(replaced.err);
  CHECK(replaced.exit_code == 0);
  CHECK(node.sim
            ->object("/apis/apps/v1/namespaces/nvidia-device-plugin/daemonsets/"
                     "nvdp-nvidia-device-plugin")
            .is_null());
  CHECK(node.allocatable() == "1");
}

TEST_CASE("a timeout names the lowest broken layer the cluster shows",
          "[e2e][cluster]") {
  REQUIRE_PARTS();
  SECTION("image never imported: ImagePullBackOff on an air-gapped node") {
    Node node;
    Run r = node.gpunode({"install", "--skip", "image", "--timeout", "4s"});
    INFO(r.err);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("[image]"));
    CHECK_THAT(r.err, Catch::Contains("ImagePullBackOff"));
  }
  SECTION("handler missing: no runtime for nvidia") {
    Node node("toolkit-after-k3s");
    Run r = node.install({"--skip", "handler", "--timeout", "4s"});
    INFO(r.err);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("[handler]"));
    CHECK_THAT(r.err, Catch::Contains("systemctl restart k3s"));
  }
}

TEST_CASE("status names the field failures it finds", "[e2e][cluster]") {
  REQUIRE_PARTS();
  SECTION(
      "the upstream manifest without runtimeClassName: advertises nothing") {
    Node node;
    REQUIRE(node.install().exit_code == 0);
    Run patched = node.kubectl(
        {"-n", "kube-system", "patch", "ds", "nvidia-device-plugin-daemonset",
         "--type=json", "-p",
         R"([{"op":"remove","path":"/spec/template/spec/runtimeClassName"}])"});
    REQUIRE(patched.exit_code == 0);
    // The DaemonSet restarts its pod under runc; it registers nothing.
    for (int i = 0; i < 200 && node.allocatable() != "0"; ++i) usleep(10000);
    Run status = node.gpunode({"status"});
    INFO(status.err);
    CHECK(status.exit_code == 1);
    CHECK_THAT(status.err, Catch::Contains("runtimeClassName"));
    // The last line names what breaks the node (issue 11: it named the
    // image stage's lesser "not pinned").
    std::string last = status.err.substr(0, status.err.size() - 1);
    last = last.substr(last.rfind('\n') + 1);
    CHECK_THAT(last, Catch::Contains("status: "));
    CHECK_THAT(last, Catch::Contains("- plugin: "));
    CHECK_THAT(last, Catch::Contains("runtimeClassName"));
    // install puts it right.
    Run fixed = node.install();
    CHECK(fixed.exit_code == 0);
    CHECK(node.allocatable() == "1");
  }
  SECTION("resource renamed on the node but not in the workloads' setting") {
    Node node;
    REQUIRE(node.install({"--variant", "time-slicing", "--rename-shared"})
                .exit_code == 0);
    Run status = node.gpunode({"status", "--variant", "time-slicing"});
    INFO(status.err);
    CHECK(status.exit_code == 1);
    CHECK_THAT(status.err, Catch::Contains("nvidia.com/gpu.shared"));
  }
}

TEST_CASE(
    "API unreachable, wrong CA, expired certificate: exit 1, clear, nothing "
    "changed",
    "[e2e][cluster]") {
  REQUIRE_PARTS();
  Node node;
  // --kubeconfig is a host path, under --root like every other.
  auto under_root = [&](const std::string& kubeconfig,
                        const std::string& name) {
    write_text(node.root + "/etc/rancher/k3s/" + name, read_text(kubeconfig),
               0600);
    return "/etc/rancher/k3s/" + name;
  };
  SECTION("wrong CA") {
    Run r = node.install(
        {"--kubeconfig",
         under_root(node.sim->kubeconfig_with_wrong_ca(), "wrong-ca.yaml")});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("certificate"));
  }
  SECTION("expired client certificate") {
    Run r = node.install(
        {"--kubeconfig",
         under_root(node.sim->kubeconfig_with_expired_cert(), "expired.yaml")});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("expired"));
  }
  SECTION("API server not answering") {
    node.sim->faults({{"refuse_ms", 60000}});
    Run r = node.install({"--timeout", "5s"});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("k3s"));
  }
  CHECK(node.sim->stats()["writes"] == 0);
  CHECK(node.ctd.image_names()
            .empty());  // stopped at the runtimeclass layer, below the image
}

TEST_CASE("API faults are retried within the deadline", "[e2e][cluster]") {
  REQUIRE_PARTS();
  Node node;
  node.sim->faults({{"error_5xx", 3}});
  node.sim->faults({{"error_429", 2}, {"retry_after", 1}});
  Run r = node.install({"--variant", "time-slicing"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(node.allocatable() == "8");
}

TEST_CASE("uninstall removes what gpunode made and keeps what it did not",
          "[e2e][cluster]") {
  REQUIRE_PARTS();
  Node node;
  REQUIRE(node.install({"--variant", "time-slicing"}).exit_code == 0);
  // The CUDA sample that install --smoke imports goes with the plugin's.
  REQUIRE(node.ctd.ctr({"images", "import", node.cuda_sample_archive()})
              .succeeded());
  Run r = node.gpunode({"uninstall", "--json"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(node.sim->object(kDsPath).is_null());
  CHECK(node.sim->object(kCmPath).is_null());
  CHECK(node.sim->object(kRcPath).is_null());
  CHECK(node.ctd.image_names().empty());
  CHECK_THAT(r.err, Catch::Contains("image nvcr.io/nvidia/k8s/cuda-sample:"
                                    "vectoradd-cuda12.5.0: removed"));
  CHECK_THAT(r.out,
             Catch::Contains(R"({"stage":"smoke-image","status":"removed"})"));
  // The node's GPU labels go too (the independent try of issue 25: a
  // single-node server's uninstall left them).
  const auto labels =
      node.sim->object("/api/v1/nodes/gpu-node-1")["metadata"].value(
          "labels", json::object());
  CHECK_FALSE(labels.contains("nvidia.com/gpu.present"));
  CHECK_FALSE(labels.contains("nvidia.com/gpu.count"));
  CHECK_THAT(r.out,
             Catch::Contains(R"({"stage":"labels","status":"removed"})"));
  // Regression (independent try of issue 26): its result event said
  // neither the part it did nor with which credentials, as install's does.
  const auto result =
      json::parse(r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1));
  CHECK(result["event"] == "result");
  CHECK(result["scope"] == "both");
  CHECK(result["role"] == "server");
  CHECK(result["kubeconfig"] == "/etc/rancher/k3s/k3s.yaml");

  // k3s's own RuntimeClass (runtimes.yaml) carries no gpunode label: kept.
  const std::string rc = node.dir.path() + "/rc.yaml";
  write_text(rc,
             "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  "
             "name: nvidia\nhandler: nvidia\n");
  REQUIRE(node.kubectl({"apply", "--server-side", "-f", rc}).exit_code == 0);
  REQUIRE(node.install().exit_code == 0);
  REQUIRE(node.ctd.ctr({"images", "import", node.cuda_sample_archive()})
              .succeeded());
  const auto images = node.ctd.image_names();
  Run again = node.gpunode({"uninstall", "--keep-image"});
  CHECK(again.exit_code == 0);
  CHECK_FALSE(node.sim->object(kRcPath).is_null());
  CHECK(node.ctd.image_names() == images);
}

TEST_CASE("with --smoke, a CUDA Pod runs to Test PASSED and deletes it",
          "[e2e][cluster]") {
  REQUIRE_PARTS();
  Node node;
  REQUIRE(node.ctd.ctr({"images", "import", node.cuda_sample_archive()})
              .succeeded());
  Run r = node.install({"--smoke"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("[smoke]"));
  Run pods = node.kubectl({"get", "pods", "-o", "name"});
  CHECK(pods.out.find("gpunode-smoke") == std::string::npos);
}

// The independent try of issue 25: a bare `status` on a healthy
// time-slicing node said "would update DaemonSet (default variant)", exit
// 1, with a restart as the fix; `plan` of a change not yet applied gave the
// same restart. status given no settings takes the cluster's.
TEST_CASE(
    "a bare status takes the settings the cluster runs, in every variant, "
    "plan of a change names install, not a restart",
    "[e2e][cluster]") {
  REQUIRE_PARTS();
  struct Variant {
    std::vector<std::string> flags;
    std::string resource;
    std::string count;
  };
  const std::vector<Variant> variants = {
      {{}, "nvidia.com/gpu", "1"},
      {{"--variant", "time-slicing", "--replicas", "4"}, "nvidia.com/gpu", "4"},
      {{"--variant", "time-slicing", "--replicas", "4", "--rename-shared"},
       "nvidia.com/gpu.shared",
       "4"}};
  for (const Variant& v : variants) {
    const std::string name = v.flags.empty()       ? "default"
                             : v.flags.size() == 4 ? "4"
                                                   : "renamed";
    DYNAMIC_SECTION("variant " << name) {
      Node node;
      REQUIRE(node.install(v.flags).exit_code == 0);
      REQUIRE(node.allocatable(v.resource) == v.count);
      node.sim->reset_stats();
      Run status = node.gpunode({"status"});
      INFO(status.err);
      CHECK(status.exit_code == 0);
      CHECK(status.err.find("would update") == std::string::npos);
      CHECK(status.err.find("previous config") == std::string::npos);
      CHECK(node.sim->stats()["writes"] == 0);

      // A change of replicas only, on the resource the node serves.
      std::vector<std::string> change = {"plan", "--variant", "time-slicing",
                                         "--replicas", "2"};
      if (v.resource != "nvidia.com/gpu") change.push_back("--rename-shared");
      Run plan = node.gpunode(change);
      INFO(plan.err);
      CHECK(plan.err.find("rollout restart") == std::string::npos);
      CHECK_THAT(plan.err,
                 Catch::Contains("the device plugin DaemonSet carries other "
                                 "settings than these"));
      CHECK(node.sim->stats()["writes"] == 0);
      CHECK(node.allocatable(v.resource) == v.count);
    }
  }
}
