// Proof on every GPU, end to end: the real gpunode binary against the
// simulated k3s node, whose kubelet allocates the device plugin's device
// IDs to containers (test/sim/k3ssim/devices.py) and whose proof Pods print
// the GPU they were given. Every GPU must pass, a GPU that fails or is
// never reached must be named, and no proof Pod may be left behind.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "sim_gpu_node.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

json smoke_event(const Run& r) { return last_stage_event(r.out, "smoke"); }

// The UUIDs the NVML stand-in gives GPU 0..n-1 (test/stubs/stub_nvidia_ml.c).
std::vector<std::string> stand_in_uuids(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "GPU-6f9abcd6-2781-31d5-1032-cc2f7821fb%02x",
                  0xb8 + i);
    out.push_back(buf);
  }
  return out;
}

std::vector<std::string> uuids_with(const json& facts,
                                    const std::string& result) {
  std::vector<std::string> out;
  for (const auto& g : facts.value("gpus", json::array()))
    if (g.value("result", "") == result) out.push_back(g.value("uuid", ""));
  return out;
}

// Proof Pods still there, a moment after the run (a Pod deleted while it
// runs is Terminating until the kubelet has stopped its container).
bool proof_pods_left(SimGpuNode& node) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const Run pods = node.kubectl({"get", "pods", "-o", "name"});
    if (pods.out.find("gpunode-smoke") == std::string::npos) return false;
    if (std::chrono::steady_clock::now() > until) {
      UNSCOPED_INFO(
          "left: " << node.kubectl({"get", "pods", "-o", "yaml"}).out);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// The CUDA sample in the node's containerd, as an operator imports it.
void import_sample(SimGpuNode& node) {
  REQUIRE(node.ctd.ctr({"images", "import", node.cuda_sample_archive()})
              .succeeded());
}

std::vector<std::string> variant_flags(const std::string& variant) {
  if (variant == "time-slicing")
    return {"--variant", "time-slicing", "--replicas", "4"};
  if (variant == "rename")
    return {"--variant", "time-slicing", "--replicas", "2", "--rename-shared"};
  return {};
}

}  // namespace

TEST_CASE("proof e2e: install --smoke proves every GPU, in every variant",
          "[e2e][cluster][proof]") {
  REQUIRE_PARTS();
  const int gpus = GENERATE(1, 2, 8);
  const std::string variant =
      GENERATE(as<std::string>{}, "default", "time-slicing", "rename");
  INFO(gpus << " GPU(s), " << variant);
  SimGpuNode node("good-v3", gpus);
  import_sample(node);
  std::vector<std::string> extra = variant_flags(variant);
  for (const char* f : {"--smoke", "--json", "--timeout", "120s"})
    extra.push_back(f);
  Run r = node.install(extra);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json e = smoke_event(r);
  REQUIRE(e.is_object());
  CHECK(e["status"] == "applied");
  CHECK(e["facts"]["result"] == "passed");
  // Each GPU the node published, proven once, by its UUID.
  CHECK(uuids_with(e["facts"], "passed") == stand_in_uuids(gpus));
  CHECK(e["facts"]["nodes"].size() == 1);
  CHECK(e["facts"]["nodes"][0]["uuids_published"] == true);
  CHECK(e["facts"]["nodes"][0]["unreached"] == 0);
  // One Pod per GPU: the plugin spreads replicas over the GPUs.
  CHECK(e["facts"]["nodes"][0]["pods"] == gpus);
  for (const auto& g : e["facts"]["gpus"]) {
    CHECK(g["node"] == "gpu-node-1");
    CHECK_THAT(g.value("pod", ""), Catch::StartsWith("gpunode-smoke-"));
    CHECK(g["at"].is_string());
  }
  CHECK_THAT(e.value("summary", ""),
             Catch::Contains("every GPU passed the CUDA sample: " +
                             std::to_string(gpus) + " GPU(s) on 1 node(s)"));
  // This host has no DCGM: said so, and no failure.
  CHECK(e["facts"]["dcgm"]["state"] == "absent");
  // The node published its GPUs beside the labels.
  std::string published;
  for (const auto& u : stand_in_uuids(gpus))
    published += (published.empty() ? "" : ",") + u;
  CHECK(node.sim->object(kNodePath)["metadata"]["annotations"].value(
            "gpunode.io/gpu-uuids", "") == published);
  CHECK_FALSE(proof_pods_left(node));
}

TEST_CASE(
    "proof e2e: time-slicing where the kubelet hands out one GPU's replicas "
    "first still covers every GPU, in more rounds",
    "[e2e][cluster][proof]") {
  REQUIRE_PARTS();
  SimGpuNode node("good-v3", 2);
  import_sample(node);
  REQUIRE(node.install(variant_flags("time-slicing")).exit_code == 0);
  node.sim->set_node({{"allocation", "first-free"}});
  Run r = node.gpunode({"prove", "--json", "--timeout", "120s"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json e = smoke_event(r);
  CHECK(uuids_with(e["facts"], "passed") == stand_in_uuids(2));
  // Round one's 2 Pods both got GPU 0; round two took every free slot.
  CHECK(e["facts"]["nodes"][0]["pods"].get<int>() > 2);
  CHECK_FALSE(proof_pods_left(node));
}

TEST_CASE("proof e2e: a GPU on which CUDA fails is named, exit 1",
          "[e2e][cluster][proof]") {
  REQUIRE_PARTS();
  const std::string variant =
      GENERATE(as<std::string>{}, "default", "time-slicing");
  INFO(variant);
  SimGpuNode node("good-v3", 2);
  import_sample(node);
  REQUIRE(node.install(variant_flags(variant)).exit_code == 0);
  node.sim->set_node({{"failing", {1}}});
  Run r = node.gpunode({"prove", "--json", "--timeout", "120s"});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  const json e = smoke_event(r);
  REQUIRE(e.is_object());
  CHECK(e["code"] == "smoke.gpu-failed");
  const auto uuids = stand_in_uuids(2);
  CHECK(uuids_with(e["facts"], "passed") == std::vector<std::string>{uuids[0]});
  CHECK(uuids_with(e["facts"], "failed") == std::vector<std::string>{uuids[1]});
  CHECK_THAT(
      e.value("summary", ""),
      Catch::Contains("GPU " + uuids[1] + " on node gpu-node-1 failed") &&
          Catch::Contains("uncorrectable ECC error"));
  CHECK_THAT(e.value("fix", ""),
             Catch::Contains("nvidia-smi -q -i " + uuids[1]));
  CHECK(e["facts"]["result"] == "failed");
  CHECK_FALSE(proof_pods_left(node));
}

TEST_CASE("proof e2e: a GPU the plugin does not hand out is named unreached",
          "[e2e][cluster][proof]") {
  REQUIRE_PARTS();
  SimGpuNode node("good-v3", 2);
  import_sample(node);
  REQUIRE(node.install().exit_code == 0);
  // The plugin advertises one GPU only (the other unhealthy): the node
  // published two.
  node.sim->set_node({{"healthy", 1}});
  Run r = node.gpunode({"prove", "--json", "--timeout", "120s"});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  const json e = smoke_event(r);
  REQUIRE(e.is_object());
  CHECK(e["code"] == "smoke.unreached");
  const auto uuids = stand_in_uuids(2);
  CHECK(uuids_with(e["facts"], "unreached") ==
        std::vector<std::string>{uuids[1]});
  CHECK_THAT(e.value("summary", ""),
             Catch::Contains("GPU " + uuids[1] + " never ran a proof Pod"));
  CHECK_FALSE(proof_pods_left(node));
}

TEST_CASE("proof e2e: gpunode prove changes nothing but its own Pods",
          "[e2e][cluster][proof]") {
  REQUIRE_PARTS();
  const std::string variant =
      GENERATE(as<std::string>{}, "default", "time-slicing", "rename");
  INFO(variant);
  SimGpuNode node("good-v3", 2);
  import_sample(node);
  REQUIRE(node.install(variant_flags(variant)).exit_code == 0);
  const EndState before = end_state(node);
  const std::string version =
      node.sim->object(kDsPath)["metadata"].value("resourceVersion", "");
  // No sharing flags: the slot is what the cluster runs, not a default.
  Run r = node.gpunode({"prove", "--json", "--timeout", "120s"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json result = json::parse(last_line(r.out));
  CHECK(result["command"] == "prove");
  CHECK(smoke_event(r)["facts"]["result"] == "passed");
  for (const std::string& line :
       {std::string("[driver]"), std::string("[plugin]")})
    CHECK(r.err.find(line) == std::string::npos);
  CHECK(node.sim->object(kDsPath)["metadata"].value("resourceVersion", "") ==
        version);
  EndState after = end_state(node);
  after.journal = before.journal;  // prove journals its own run
  after.last_exit = before.last_exit;
  after.last_finished = before.last_finished;
  // ... and keeps the proof for evidence records (proof.json).
  after.state_dir.erase(
      std::remove(after.state_dir.begin(), after.state_dir.end(), "proof.json"),
      after.state_dir.end());
  CHECK(after == before);
  CHECK_FALSE(proof_pods_left(node));
}

TEST_CASE("proof e2e: Ctrl-C during the proof deletes every proof Pod",
          "[e2e][cluster][proof]") {
  REQUIRE_PARTS();
  SimGpuNode node("good-v3", 2);
  import_sample(node);
  REQUIRE(node.install().exit_code == 0);
  Run r = node.gpunode(
      {"prove", "--json", "--timeout", "120s"},
      {"GPUNODE_TEST_CRASH_AT=proof:created", "GPUNODE_TEST_CRASH_SIGNAL=INT"});
  INFO(r.err);
  CHECK(r.exit_code == 130);
  CHECK_THAT(r.err, Catch::Contains("interrupted by SIGINT"));
  CHECK_FALSE(proof_pods_left(node));
  // The rerun converges.
  Run again = node.gpunode({"prove", "--json", "--timeout", "120s"});
  INFO(again.err);
  CHECK(again.exit_code == 0);
}

TEST_CASE(
    "proof e2e: --proof takes quick or deep only, and --scope node is "
    "refused before anything is read",
    "[e2e][cluster][proof]") {
  REQUIRE_PARTS();
  SimGpuNode node("good-v3", 1);
  const auto tree = snapshot_host_tree(node.root);
  Run bad = node.gpunode({"prove", "--proof", "thorough", "--json"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--proof: 'thorough' is not one of "
                                      "quick, deep"));
  Run node_scope = node.gpunode({"prove", "--scope", "node", "--json"});
  CHECK(node_scope.exit_code == 2);
  CHECK_THAT(node_scope.err,
             Catch::Contains("(the proof Pods are the cluster part's)"));
  CHECK(snapshot_host_tree(node.root) == tree);
}

#include "gpunode/images_lock.hpp"
#include "oci_builder.hpp"
#include "sim_cluster.hpp"

TEST_CASE(
    "proof e2e: prove from the server covers every GPU of every GPU agent, "
    "in every variant",
    "[e2e][many-nodes][proof]") {
  REQUIRE_PARTS();
  const std::string variant =
      GENERATE(as<std::string>{}, "default", "time-slicing", "rename");
  INFO(variant);
  SimClusterOptions o;
  o.nodes = {{"server", true, 0, "cpu-server"},
             {"gpu-a", false, 1, ""},
             {"gpu-b", false, 2, ""},
             {"cpu-1", false, 0, "cpu-agent"}};
  SimCluster c(o);
  ImageSpec sample;
  sample.ref_name = gpunode::locked_cuda_sample_image().ref;
  sample.seed = 7;
  TempDir dir;
  build_image(dir.path() + "/cuda-sample.tar", sample);
  for (const std::string node : {"gpu-a", "gpu-b"})
    REQUIRE(c.node(node)
                .containerd
                ->ctr({"images", "import", dir.path() + "/cuda-sample.tar"})
                .succeeded());
  std::vector<std::string> cluster{"install", "--scope", "cluster", "--timeout",
                                   "60s"};
  for (const std::string& f : variant_flags(variant)) cluster.push_back(f);
  REQUIRE(c.gpunode("server", cluster).exit_code == 0);
  for (const std::string node : {"gpu-a", "gpu-b"}) {
    Run agent = c.gpunode(node, {"install", "--image-archive",
                                 c.image_archive(), "--timeout", "60s"});
    INFO(node << "\n" << agent.err);
    REQUIRE(agent.exit_code == 0);
  }
  // An agent's own identity cannot make Pods: refused before anything.
  Run on_agent = c.gpunode("gpu-a", {"prove", "--json"});
  CHECK(on_agent.exit_code == 2);
  CHECK_THAT(on_agent.err,
             Catch::Contains("(the proof Pods are the cluster part's)"));

  Run r = c.gpunode(
      "server", {"prove", "--scope", "cluster", "--json", "--timeout", "120s"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json e = smoke_event(r);
  REQUIRE(e.is_object());
  std::map<std::string, std::set<std::string>> passed;
  for (const auto& g : e["facts"]["gpus"]) {
    CHECK(g["result"] == "passed");
    passed[g.value("node", "")].insert(g.value("uuid", ""));
  }
  const auto one = stand_in_uuids(1), two = stand_in_uuids(2);
  CHECK(passed["gpu-a"] == std::set<std::string>(one.begin(), one.end()));
  CHECK(passed["gpu-b"] == std::set<std::string>(two.begin(), two.end()));
  CHECK(passed.size() == 2);            // the CPU nodes are no GPU nodes
  CHECK(e["facts"]["dcgm"].is_null());  // no node part on the server
  CHECK(c.kubectl({"get", "pods", "-o", "name"}).out.find("gpunode-smoke") ==
        std::string::npos);
}
