// Why a node does not advertise its slots: bottom-up, the first layer whose
// trouble shows in the cluster (FACTS.md, field failures). Read-only; what
// it can read depends on the identity: an admin sees the DaemonSet and the
// events, a node's own identity its pods only (the Node authorizer denies
// DaemonSets, events and logs, which then just say less).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

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

// What one pass over the nodes reads of the cluster, each read once: the
// plugin's DaemonSet, its pods, the events about an object and pods' logs.
// Over many nodes (the cluster part) the pods are one list for all nodes
// and the events at most kEventReads lists and then one of the namespace,
// so a pass costs a few requests, not a few a node (the real tier's scale
// benchmark, issue 25: about 5 requests a short node, 5,000 before the
// wait at 1,000 nodes). Over one node, that node's own pods: what the node
// part's identity reads, and the least there is to read.
class ClusterPass {
 public:
  ClusterPass(Context& ctx, kube::Client& kube, bool many,
              std::chrono::steady_clock::time_point deadline)
      : ctx_(ctx), kube_(kube), many_(many), deadline_(deadline) {}

  Context& ctx() { return ctx_; }
  kube::Client& kube() { return kube_; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }
  // The DaemonSet; nullopt when it is not installed.
  Result<std::optional<kube::json>> daemonset();
  // The plugin's pods scheduled on NODE.
  Result<std::vector<kube::json>> pods_on(const std::string& node);
  // "reason: message" lines of the events about one object in the plugin's
  // namespace; empty when none, or none can be read.
  std::string events_about(const std::string& name);
  std::optional<std::string> log_tail(const std::string& pod_name) {
    return logs_.tail(ctx_, kube_, pod_name, deadline_);
  }

 private:
  static constexpr int kEventReads = 8;

  Context& ctx_;
  kube::Client& kube_;
  const bool many_;
  const std::chrono::steady_clock::time_point deadline_;
  std::optional<Result<std::optional<kube::json>>> daemonset_;
  std::optional<std::map<std::string, std::vector<kube::json>>> pods_by_node_;
  std::map<std::string, std::string> events_;
  std::optional<std::map<std::string, std::string>> namespace_events_;
  PodLogs logs_;
};

std::optional<Diagnosis> diagnose(ClusterPass& pass, const Expectation& want,
                                  const kube::json& node);

}  // namespace gpunode
