#include "stages/allocatable_diagnosis.hpp"

#include <algorithm>

#include "gpu/below_driver.hpp"
#include "plugin/gpu_nodes.hpp"
#include "plugin/live_plugin.hpp"
#include "run/host_role.hpp"
#include "stages/smoke_diagnosis.hpp"

namespace gpunode {
namespace {

using kube::json;
using Deadline = std::chrono::steady_clock::time_point;

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}
std::string last_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const std::size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

std::string event_text(const std::string& reason, const std::string& message) {
  return reason + ": " + message + "\n";
}

}  // namespace

std::optional<std::string> PodLogs::tail(Context& ctx, kube::Client& kube,
                                         const std::string& pod_name,
                                         Deadline deadline) {
  if (unreadable_) return std::nullopt;
  const Deadline until =
      std::min(deadline, ctx.host.clock().steady_now() + kBudget);
  auto log =
      kube.get_text(std::string("/api/v1/namespaces/") + kPluginNamespace +
                        "/pods/" + pod_name + "/log?tailLines=20",
                    until);
  if (log) return *log;
  // Denied (403: the Node authorizer's identity) or gone (404) says nothing
  // about the other pods' logs; a server error or a timeout does.
  const int status = log.error().status;
  if (status != 403 && status != 404) unreadable_ = true;
  return std::nullopt;
}

Result<std::optional<json>> ClusterPass::daemonset() {
  if (!daemonset_) daemonset_ = kube_.get(daemonset_path(), deadline_);
  return *daemonset_;
}

Result<std::vector<json>> ClusterPass::pods_on(const std::string& node) {
  if (!many_) {
    auto pods = kube_.list(plugin_pods_path(node), deadline_);
    if (!pods) return pods.error();
    return pods->value("items", json::array()).get<std::vector<json>>();
  }
  if (!pods_by_node_) {
    auto pods = kube_.list(plugin_pods_path(""), deadline_);
    if (!pods) return pods.error();
    pods_by_node_.emplace();
    for (const auto& pod : pods->value("items", json::array()))
      (*pods_by_node_)[pod["spec"].value("nodeName", "")].push_back(pod);
  }
  const auto it = pods_by_node_->find(node);
  return it == pods_by_node_->end() ? std::vector<json>() : it->second;
}

std::string ClusterPass::events_about(const std::string& name) {
  if (const auto it = events_.find(name); it != events_.end())
    return it->second;
  if (namespace_events_) {
    const auto it = namespace_events_->find(name);
    return it == namespace_events_->end() ? "" : it->second;
  }
  if (!many_ || static_cast<int>(events_.size()) < kEventReads) {
    std::string text;
    for (const auto& e :
         read_pod_events(kube_, kPluginNamespace, name, deadline_))
      text += event_text(e.reason, e.message);
    return events_[name] = text;
  }
  // Many nodes in trouble: one list of the namespace's events serves them.
  namespace_events_.emplace();
  auto listed = kube_.list(
      std::string("/api/v1/namespaces/") + kPluginNamespace + "/events",
      deadline_);
  if (listed) {
    for (const auto& e : listed->value("items", json::array())) {
      (*namespace_events_)[e["involvedObject"].value("name", "")] +=
          event_text(e.value("reason", ""), e.value("message", ""));
    }
  }
  return events_about(name);
}

bool Diagnosis::node_part() const {
  return layer == "driver" || layer == "toolkit" || layer == "handler" ||
         layer == "image";
}

// Bottom-up: the first layer whose trouble shows in the cluster.
std::optional<Diagnosis> diagnose(ClusterPass& pass, const Expectation& want,
                                  const json& node) {
  Context& ctx = pass.ctx();
  // Without the DaemonSet to read, a missing pod says the cluster part is
  // missing.
  const bool admin = ctx.identity_reads_daemonsets();
  // Whether the DaemonSet's template carries the wanted config: when not,
  // a pod on other settings waits for the plugin stage, not a restart.
  bool template_current = true;
  if (admin) {
    auto ds = pass.daemonset();
    if (!ds) return Diagnosis{"cluster", ds.error().message, ds.error().fix};
    if (!*ds) {
      return Diagnosis{"plugin", "the device plugin DaemonSet is not installed",
                       "gpunode install (without --skip plugin)"};
    }
    const json& annotations = (**ds)["spec"]["template"]["metadata"].value(
        "annotations", json::object());
    template_current =
        annotations.value(kConfigHashAnnotation, "") == want.plan->config_hash;
  }
  auto pods = pass.pods_on(want.node);
  if (!pods)
    return Diagnosis{"cluster", pods.error().message, pods.error().fix};
  const std::vector<json>& items = *pods;
  if (items.empty()) {
    const std::string events = pass.events_about(kPluginDaemonSet);
    if (events.find("RuntimeClass") != std::string::npos) {
      return Diagnosis{
          "runtimeclass",
          "the DaemonSet cannot create its pod: " + first_line(events),
          "gpunode install (the runtimeclass stage creates it)"};
    }
    if (!admin) {
      return Diagnosis{"plugin",
                       "no device plugin pod is scheduled on node " + want.node,
                       cluster_part_command()};
    }
    return Diagnosis{"plugin",
                     "no device plugin pod is scheduled on node " + want.node +
                         (events.empty() ? "" : ": " + first_line(events)),
                     "kubectl -n kube-system describe daemonset " +
                         std::string(kPluginDaemonSet)};
  }
  const json& pod = items.front();
  const std::string pod_name = pod["metadata"].value("name", "");
  const std::string events = pass.events_about(pod_name);
  std::string waiting, waiting_message;
  for (const auto& cs :
       pod["status"].value("containerStatuses", json::array())) {
    if (cs.contains("state") && cs["state"].contains("waiting")) {
      waiting = cs["state"]["waiting"].value("reason", "");
      waiting_message = cs["state"]["waiting"].value("message", "");
    }
  }
  if (waiting == "ImagePullBackOff" || waiting == "ErrImagePull" ||
      waiting == "ErrImageNeverPull") {
    return Diagnosis{
        "image",
        "plugin pod " + pod_name + " is " + waiting + ": the image " +
            ctx.opts.image_ref +
            " is not in k3s's containerd, and this air-gapped node can never "
            "pull it",
        "gpunode install --image-archive <the device plugin archive>"};
  }
  if (events.find("no runtime for \"nvidia\"") != std::string::npos) {
    return Diagnosis{
        "handler",
        "plugin pod " + pod_name +
            " cannot start: no runtime for \"nvidia\" is "
            "configured (k3s started before the NVIDIA container toolkit)",
        "sudo systemctl restart k3s, or gpunode install --restart-k3s"};
  }
  if (waiting == "CreateContainerConfigError" ||
      events.find("configmap \"") != std::string::npos) {
    return Diagnosis{
        "plugin",
        "plugin pod " + pod_name + " cannot mount its config: " +
            first_line(events.empty() ? waiting_message : events),
        "gpunode install (the plugin stage applies the ConfigMap)"};
  }
  if (waiting == "CrashLoopBackOff") {
    const auto log = pass.log_tail(pod_name);
    return Diagnosis{"plugin",
                     "plugin pod " + pod_name + " is crash-looping" +
                         (log ? ": " + last_line(*log) : ""),
                     "kubectl -n kube-system logs " + pod_name};
  }
  if (pod["status"].value("phase", "") != "Running") {
    return Diagnosis{"plugin",
                     "plugin pod " + pod_name + " is " +
                         pod["status"].value("phase", "?") +
                         (waiting.empty() ? "" : " (" + waiting + ")"),
                     "kubectl -n kube-system describe pod " + pod_name};
  }
  if (!pod["spec"].contains("runtimeClassName")) {
    return Diagnosis{
        "plugin",
        "plugin pod " + pod_name +
            " runs without runtimeClassName: under runc it "
            "cannot load NVML and advertises no GPU",
        "apply the platform's manifest (it sets runtimeClassName: nvidia): "
        "gpunode install"};
  }
  // Absent and "0" mean the same here: nothing schedulable.
  const long long count =
      node.is_null() ? 0 : advertised(node, want.plan->resource).value_or(0);
  const std::string other =
      want.plan->resource == kGpuResource ? kSharedGpuResource : kGpuResource;
  const long long other_count =
      node.is_null() ? 0 : advertised(node, other).value_or(0);
  if (count == 0 && other_count > 0) {
    return Diagnosis{
        "plugin",
        "node advertises " + other + ": " + std::to_string(other_count) +
            " but not " + want.plan->resource +
            ": workloads asking for one will not schedule (renameByDefault)",
        "use the same --rename-shared setting as the cluster's workloads "
        "(GEO_MLOPS_SERVING_GPU_RESOURCE)"};
  }
  const auto annotations = pod["metadata"].value("annotations", json::object());
  if (annotations.value(kConfigHashAnnotation, "") != want.plan->config_hash) {
    // A template on other settings waits for the plugin stage; a pod left
    // behind by a current template, for a restart.
    if (!template_current) {
      return Diagnosis{"plugin",
                       "the device plugin DaemonSet carries other settings "
                       "than these (" +
                           want.plan->exposure->describe() +
                           "), and plugin pod " + pod_name + " runs them",
                       "gpunode install --scope cluster with these settings "
                       "(the plugin stage applies them)"};
    }
    return Diagnosis{"plugin",
                     "plugin pod " + pod_name +
                         " still runs the previous config (the plugin "
                         "reads it only at start)",
                     "kubectl -n kube-system rollout restart ds/" +
                         std::string(kPluginDaemonSet)};
  }
  if (count == 0) {
    const auto log = pass.log_tail(pod_name);
    const bool nvml = log && log->find("NVML") != std::string::npos;
    return Diagnosis{
        nvml ? "handler" : "plugin",
        "plugin pod " + pod_name + " runs but advertises no GPU" +
            (log ? ": " + last_line(*log) : ""),
        nvml ? "check the handler layer: gpunode status --only toolkit,handler"
             : "kubectl -n kube-system logs " + pod_name};
  }
  if (count < want.count()) {
    const std::string short_by = "node advertises " + std::to_string(count) +
                                 " of " + std::to_string(want.count());
    // On this host the driver layer can say which GPU the plugin dropped:
    // an Xid it counts as critical, or memory errors that raise one.
    if (want.this_node) {
      if (auto inv = ctx.gpus()) {
        std::string named;
        for (const auto& f : health_findings(ctx, **inv)) {
          if (f.kind == "xid" && !f.unhealthy) continue;
          named += (named.empty() ? "" : "; ") + f.message;
        }
        if (!named.empty()) {
          return Diagnosis{
              "driver",
              short_by +
                  ": the device plugin reports a GPU unhealthy: " + named,
              "drain the node, reset the GPU (sudo nvidia-smi -r -i "
              "<index>) or reboot; gpunode status --only driver"};
        }
      }
    }
    return Diagnosis{"driver", short_by + ": a GPU is unhealthy or in MIG mode",
                     "nvidia-smi -q | grep -iE 'mig mode|xid|retired'; "
                     "gpunode status --only driver"};
  }
  if (count > want.count()) {
    return Diagnosis{
        "plugin",
        "node advertises " + std::to_string(count) + ", more than " +
            std::to_string(want.count()) +
            ": another device plugin (or an old config) advertises too",
        "kubectl get ds -A | grep -i device-plugin"};
  }
  return std::nullopt;
}

}  // namespace gpunode
