// Each GPU node's slots under the run's plan: the one owner of that
// expectation. The plugin stage's rollout (what each node advertises now,
// and after), the allocatable check, its wait and its diagnosis all read
// it, through Context::expected_slots(), which computes it once per
// cluster state (the plugin stage's apply and the wait's start take a new
// one: labels and the DaemonSet change under them).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/gpu.hpp"
#include "gpunode/kube.hpp"
#include "plugin/device_plugin_plan.hpp"

namespace gpunode {

struct NodeExpectation {
  std::string node;
  bool this_node = false;
  // This host's counted GPUs, else the node's nvidia.com/gpu.count label.
  std::optional<int> gpus;
  bool labelled = false;     // nvidia.com/gpu.present=true
  bool serving = false;      // it advertises a GPU resource now
  std::string now_resource;  // what it advertises now, if anything
  long long now = 0;
  // false when this run could not read the Node (now is then unknown, not
  // 0): plan --json gives null.
  bool now_known = true;
  std::optional<long long> expected;  // gpus x the plan's slots per GPU
  // Its GPUs' UUIDs: this host's from the driver, another node's as it
  // published them (kGpuUuidsAnnotation); empty when unknown.
  std::vector<std::string> uuids;
};

struct SlotExpectation {
  const DevicePluginPlan* plan = nullptr;
  // A run with the node part: this host, counted (whether or not the
  // cluster lists it as a GPU node yet).
  std::optional<NodeExpectation> self;
  // Why `self` is missing on a run with the node part: its name, or its
  // GPUs, cannot be had.
  std::optional<Error> name_unknown;
  std::optional<Error> gpus_unknown;
  // A run with the cluster part: the cluster's GPU nodes as listed
  // (plugin/gpu_nodes.hpp), this one marked; empty without it.
  std::vector<NodeExpectation> listed;
};

// What a run carries out decides the parts: `node_part` counts this host
// (`node` and `gpus`), `cluster_part` lists the cluster's GPU nodes.
struct ExpectationSources {
  const DevicePluginPlan* plan = nullptr;
  bool node_part = false;
  bool cluster_part = false;
  Result<std::string> node = std::string();
  Result<const GpuInventory*> gpus = static_cast<const GpuInventory*>(nullptr);
  // With cluster_part: lists the GPU nodes. With the node part alone (may
  // be null): reads this node's own Node, which its identity may.
  kube::Client* kube = nullptr;
  std::chrono::steady_clock::time_point deadline;
};

Result<SlotExpectation> expect_slots(const ExpectationSources& from);

}  // namespace gpunode
