// Why a node does not advertise its slots: bottom-up, the first layer whose
// trouble shows in the cluster (FACTS.md, field failures). Read-only; what
// it can read depends on the identity: an admin sees the DaemonSet and the
// events, a node's own identity its pods only (the Node authorizer denies
// DaemonSets, events and logs, which then just say less).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "gpunode/kube.hpp"
#include "gpunode/stage.hpp"
#include "plugin/device_plugin_plan.hpp"

namespace gpunode {

// One node's expected slots under the run's plan (Context::plugin_plan).
struct Expectation {
  std::string node;
  const DevicePluginPlan* plan = nullptr;
  int gpus = 0;
  bool this_node = true;  // the host this run is on
  long long count() const { return plan->slots_for(gpus); }
};

struct Diagnosis {
  std::string layer;
  std::string message;
  std::string fix;
  // A layer of the node itself (driver, toolkit, handler, image): only a
  // run of the node part there fixes it, so the cluster part stops waiting.
  bool node_part() const;
};

// A plugin pod's last log lines, for the diagnoses of one pass over the
// nodes: a hint, so each read gets a few seconds, not the run's deadline.
// The API server fetches a log from the node's kubelet (port 10250); where
// that is firewalled off, or no kubelet answers, every try is a 5xx that
// the client would retry until the deadline (the real tier, issue 25: 56 s
// of one check on one node's log, and one such wait per node). After one
// read that failed so, none is tried again in the pass.
class PodLogs {
 public:
  std::optional<std::string> tail(
      Context& ctx, kube::Client& kube, const std::string& pod_name,
      std::chrono::steady_clock::time_point deadline);

 private:
  static constexpr std::chrono::seconds kBudget{3};
  bool unreadable_ = false;
};

std::optional<Diagnosis> diagnose(
    Context& ctx, kube::Client& kube, const Expectation& want,
    const kube::json& node, std::chrono::steady_clock::time_point deadline,
    PodLogs& logs);

}  // namespace gpunode
