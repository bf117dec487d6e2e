// The node's part of the plan (plan/node_plan.hpp): the labels come from
// the GPUs counted, the images from the options, and the owned cluster
// objects in the order the cluster part makes them (uninstall reverses it).
#include "plan/node_plan.hpp"

#include <catch2/catch.hpp>

#include "plugin/gpu_labels.hpp"
#include "plugin/slot_expectation.hpp"

using namespace gpunode;

TEST_CASE("node plan: labels from the GPUs, images from the options",
          "[plan][node-plan]") {
  GpuInventory gpus;
  gpus.gpus.resize(2);
  gpus.gpus[0].name = gpus.gpus[1].name = "NVIDIA H200";
  gpus.gpus[0].memory_mib = gpus.gpus[1].memory_mib = 143771;
  Options opts;
  opts.image_ref = "registry.local/k8s-device-plugin:v0.19.3";
  opts.smoke_image = "registry.local/cuda-sample:vectoradd";
  NodePlan plan = plan_node("gpu-1", gpus, opts);
  CHECK(plan.node == "gpu-1");
  CHECK(plan.runtime_handler == "nvidia");
  CHECK(plan.labels == gpu_labels_for(gpus));
  CHECK(plan.labels.at("nvidia.com/gpu.count") == "2");
  CHECK(plan.plugin_image == opts.image_ref);
  CHECK_FALSE(plan.smoke_image);
  opts.smoke = true;
  CHECK(plan_node("gpu-1", gpus, opts).smoke_image == opts.smoke_image);

  const nlohmann::json j = plan_json(&plan, nullptr);
  CHECK(j["node"]["name"] == "gpu-1");
  CHECK(j["node"]["smoke_image"].is_null());
  CHECK_FALSE(j.contains("nodes"));
  CHECK(plan_json(nullptr, nullptr) == nlohmann::json::object());
}

TEST_CASE("node plan: the slots of each listed GPU node, else this one",
          "[plan][node-plan]") {
  SlotExpectation slots;
  NodeExpectation self;
  self.node = "gpu-1";
  self.this_node = true;
  self.gpus = 2;
  self.expected = 16;
  slots.self = self;
  nlohmann::json j = plan_json(nullptr, &slots);
  REQUIRE(j["nodes"].size() == 1);
  CHECK(j["nodes"][0]["after"] == 16);
  NodeExpectation other;
  other.node = "gpu-2";
  other.now = 8;
  other.now_resource = "nvidia.com/gpu";
  slots.listed = {self, other};
  j = plan_json(nullptr, &slots);
  REQUIRE(j["nodes"].size() == 2);
  CHECK(j["nodes"][1]["node"] == "gpu-2");
  CHECK(j["nodes"][1]["now"] == 8);
  CHECK(j["nodes"][1]["gpus"].is_null());
  CHECK(j["nodes"][1]["after"].is_null());
}

TEST_CASE("owned cluster objects: in the order the cluster part makes them",
          "[plan][node-plan]") {
  std::vector<std::string> names;
  for (const ClusterObject& o : owned_cluster_objects())
    names.push_back(o.what);
  CHECK(names == std::vector<std::string>{
                     "RuntimeClass nvidia",
                     "ConfigMap kube-system/nvidia-device-plugin-config",
                     "DaemonSet kube-system/nvidia-device-plugin-daemonset"});
}
