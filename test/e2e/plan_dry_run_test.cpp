// plan: what install would write, validated by the API server's own dry run
// (dryRun=All), and quantified (objects, bytes to import, containerd disk),
// as human lines and --json fields. Nothing is stored.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "containerd_fixture.hpp"
#include "k3s_sim.hpp"
#include "sim_gpu_node.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

// The --json event lines of a run, by event name (the last of each).
std::map<std::string, json> events(const Run& r) {
  std::map<std::string, json> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("event")) {
      std::string key = j["event"].get<std::string>();
      if (key == "stage") key += ":" + j.value("stage", "");
      out[key] = j;
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "plan on a fresh node: every write accepted by the dry run, none "
    "stored, and the quantities",
    "[e2e][plan]") {
  REQUIRE_PARTS();
  SimGpuNode node;
  Run plan = node.gpunode({"plan", "--image-archive", node.archive, "--json",
                           "--variant", "time-slicing", "--replicas", "4"});
  INFO(plan.err);
  CHECK(plan.exit_code == 0);
  const auto ev = events(plan);
  REQUIRE(ev.count("result"));
  const json& totals = ev.at("result")["plan"];
  CHECK(totals["objects"]["create"] ==
        json::array({"RuntimeClass nvidia",
                     "ConfigMap kube-system/nvidia-device-plugin-config",
                     "DaemonSet kube-system/nvidia-device-plugin-daemonset"}));
  // The node's GPU labels (the labels stage, issue 13).
  CHECK(totals["objects"]["update"] == json::array({"Node gpu-node-1"}));
  CHECK(totals["dry_run"]["accepted"] == 3);  // runtimeclass, labels, plugin
  CHECK(totals["dry_run"]["refused"] == 0);
  CHECK(totals["import_bytes"].get<std::uint64_t>() > 0);
  CHECK(totals["disk"]["needed_bytes"].get<std::uint64_t>() >=
        totals["import_bytes"].get<std::uint64_t>());
  CHECK(totals["disk"].contains("free_bytes"));
  CHECK(ev.at("stage:plugin")["facts"]["dry_run"] == "accepted");
  CHECK(ev.at("stage:plugin")["facts"]["plugin"]["replicas"] == 4);
  CHECK_THAT(plan.err, Catch::Contains("[plan]") &&
                           Catch::Contains("would create 3, update 1, delete "
                                           "0 object(s) (the API server's dry "
                                           "run accepts them)"));
  // The dry run reached the server, and stored nothing.
  const json stats = node.sim->stats();
  CHECK(stats["writes"] == 0);
  CHECK(stats["dry_run_writes"] == 4);
  CHECK(node.sim->object(kRcPath).is_null());
  CHECK(node.sim->object(kDsPath).is_null());
  CHECK(node.sim->object(kCmPath).is_null());
}

TEST_CASE("plan shows a write the API server would refuse, before install",
          "[e2e][plan]") {
  REQUIRE_PARTS();
  SimGpuNode node;
  // A DaemonSet of the same name made by hand, with another selector: the
  // platform manifest's would change spec.selector, which is immutable
  // (kubernetes pkg/apis/apps/validation ValidateDaemonSetUpdate).
  const std::string by_hand = node.dir.path() + "/by-hand.yaml";
  write_text(by_hand, R"(apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-device-plugin-daemonset
  namespace: kube-system
spec:
  selector:
    matchLabels: {app: by-hand}
  template:
    metadata:
      labels: {app: by-hand}
    spec:
      containers:
      - name: ctr
        image: registry.local/by-hand:1
)");
  REQUIRE(node.kubectl({"apply", "--server-side", "-f", by_hand}).exit_code ==
          0);
  const json before = node.sim->object(kDsPath);
  node.sim->reset_stats();
  Run plan = node.gpunode({"plan", "--image-archive", node.archive, "--json"});
  INFO(plan.err);
  CHECK(plan.exit_code == 1);
  const auto ev = events(plan);
  REQUIRE(ev.count("stage:plugin"));
  CHECK(ev.at("stage:plugin")["status"] == "blocked");
  CHECK(ev.at("stage:plugin")["code"] == "plugin.dry-run-refused");
  CHECK(ev.at("result")["plan"]["dry_run"]["refused"] == 1);
  CHECK_THAT(plan.err,
             Catch::Contains("the API server refuses what install would "
                             "write") &&
                 Catch::Contains("spec.selector") &&
                 Catch::Contains("field is immutable"));
  CHECK(node.sim->stats()["writes"] == 0);
  CHECK(node.sim->object(kDsPath)["spec"] == before["spec"]);
}

TEST_CASE("status and install --dry-run send no real write", "[e2e][plan]") {
  REQUIRE_PARTS();
  SimGpuNode node;
  Run dry = node.install({"--dry-run"});
  INFO(dry.err);
  CHECK(dry.exit_code == 0);
  CHECK_THAT(dry.err, Catch::Contains("[plan]"));
  Run status = node.gpunode({"status"});
  CHECK(status.exit_code == 1);  // nothing installed yet
  CHECK(status.err.find("[plan]") == std::string::npos);
  CHECK(node.sim->stats()["writes"] == 0);
}

TEST_CASE("plan prints the plan: this node's part and each GPU node's slots",
          "[e2e][plan]") {
  REQUIRE_PARTS();
  // Each variant, so the plan's slots follow the strategy.
  struct Case {
    std::vector<std::string> flags;
    std::string resource;
    long long after;  // the sim node has 1 GPU
  };
  for (const Case& c : {Case{{"--variant", "default"}, "nvidia.com/gpu", 1},
                        Case{{"--variant", "time-slicing", "--replicas", "4"},
                             "nvidia.com/gpu",
                             4},
                        Case{{"--variant", "time-slicing", "--rename-shared"},
                             "nvidia.com/gpu.shared",
                             8}}) {
    INFO(c.flags.back());
    SimGpuNode node;
    std::vector<std::string> args = {"plan", "--image-archive", node.archive,
                                     "--json"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    Run plan = node.gpunode(args);
    INFO(plan.err);
    CHECK(plan.exit_code == 0);
    const auto ev = events(plan);
    REQUIRE(ev.count("result"));
    const json& p = ev.at("result")["plan"];
    CHECK(p["node"]["name"] == "gpu-node-1");
    CHECK(p["node"]["runtime_handler"] == "nvidia");
    CHECK(p["node"]["labels"]["nvidia.com/gpu.present"] == "true");
    CHECK(p["node"]["labels"]["nvidia.com/gpu.count"] == "1");
    CHECK(p["node"]["plugin_image"] ==
          "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
    CHECK(p["node"]["smoke_image"].is_null());
    CHECK(p["resource"] == c.resource);
    REQUIRE(p["nodes"].size() == 1);
    CHECK(p["nodes"][0]["node"] == "gpu-node-1");
    CHECK(p["nodes"][0]["this_node"] == true);
    CHECK(p["nodes"][0]["gpus"] == 1);
    CHECK(p["nodes"][0]["after"] == c.after);
    // The labels stage applied the plan's labels, not its own.
    CHECK(ev.at("stage:labels")["facts"]["labels"].size() ==
          p["node"]["labels"].size());
  }
}
