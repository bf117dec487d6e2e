// allocatable: the node advertises GPUs x replicas of the resource, from
// plugin pods that run the current config. Waits with a watch on the Node
// (no sleep loop). When time runs out, it names the lowest broken layer from
// what the cluster shows (FACTS.md, field failures).
#include <algorithm>

#include "kube/manifests.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "run/cluster_facts.hpp"
#include "stages/plugin_cluster.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using kube::json;
using std::chrono::milliseconds;

// A watch is re-listed at least this often, so a change that shows only on
// the pods (not the node) is still seen promptly.
constexpr milliseconds kRelist = std::chrono::seconds(5);
// Saying why the wait failed, after the run's deadline.
constexpr milliseconds kDiagnosisTime = std::chrono::seconds(10);

using Deadline = std::chrono::steady_clock::time_point;

// This node's GPUs under the run's plan (Context::plugin_plan).
struct Expectation {
  std::string node;
  const DevicePluginPlan* plan = nullptr;
  int gpus = 0;
  long long count() const { return plan->slots_for(gpus); }
};

std::optional<long long> advertised(const json& node,
                                    const std::string& resource) {
  const auto alloc = node["status"].value("allocatable", json::object());
  auto it = alloc.find(resource);
  if (it == alloc.end() || !it->is_string()) return std::nullopt;
  try {
    return std::stoll(it->get<std::string>());
  } catch (...) {
    return std::nullopt;
  }
}

struct Diagnosis {
  std::string layer;
  std::string message;
  std::string fix;
};

class AllocatableStage : public Stage {
 public:
  std::string_view name() const override { return "allocatable"; }
  std::string_view layer() const override { return "node allocatable"; }

  std::string inputs(Context& ctx) const override {
    return sharing_inputs(ctx.opts.sharing) + "\nnode=" + ctx.opts.node + "\n";
  }

  Check check(Context& ctx) override {
    auto want = expectation(ctx);
    if (!want) return as_blocked(ctx, want.error());
    auto kube = ctx.cluster();
    if (!kube) return as_blocked(ctx, kube.error());
    auto node = (*kube)->get("/api/v1/nodes/" + want->node, ctx.deadline);
    if (!node) return as_blocked(ctx, node.error());
    if (!*node) {
      const Error e =
          node_not_in_cluster(ctx, **kube, want->node, ctx.deadline);
      return blocked("allocatable.no-node", e.message, e.fix, e.exit);
    }
    auto current = pods_current(**kube, *want, ctx.deadline);
    if (!current) return as_blocked(ctx, current.error());
    const auto have = advertised(**node, want->plan->resource);
    const std::string wanted = want->plan->resource + ": " +
                               std::to_string(want->count()) + " (" +
                               std::to_string(want->gpus) + " GPU x " +
                               std::to_string(want->plan->replicas) + ")";
    if (have && *have == want->count() && *current) {
      Check c = satisfied("allocatable.ok",
                          "node " + want->node + " advertises " + wanted);
      add_platform_settings(c, want->plan->resource);
      return c;
    }
    Check c =
        needed("allocatable.waiting",
               "node " + want->node + " advertises " + want->plan->resource +
                   ": " + (have ? std::to_string(*have) : "none") +
                   ", not yet " + std::to_string(want->count()),
               "wait until node " + want->node + " advertises " + wanted);
    // Say now what stands in the way; `status` shows it, `install` waits.
    auto why = diagnose(ctx, **kube, *want, **node, ctx.deadline);
    if (why) {
      c.details.push_back("[" + why->layer + "] " + why->message +
                          "; fix: " + why->fix);
      c.cause = why->layer + ": " + why->message;
    }
    return c;
  }

  Result<void> apply(Context& ctx, const Check&) override {
    auto want = expectation(ctx);
    if (!want) return want.error();
    auto kube = ctx.cluster();
    if (!kube) return kube.error();
    json last_node;
    bool done = false;
    while (!done) {
      const auto now = ctx.host.clock().steady_now();
      if (now >= ctx.deadline) break;
      const auto until = std::min(ctx.deadline, now + kRelist);
      Error failure;
      auto watched = (*kube)->watch(
          "/api/v1/nodes", "metadata.name=" + want->node,
          [&](const std::string& type, const json& node) {
            if (type == "DELETED") return kube::WatchStep::kContinue;
            last_node = node;
            const auto have = advertised(node, want->plan->resource);
            if (!have || *have != want->count())
              return kube::WatchStep::kContinue;
            auto current = pods_current(**kube, *want, ctx.deadline);
            if (!current) {
              failure = current.error();
              return kube::WatchStep::kDone;
            }
            done = *current;
            return done ? kube::WatchStep::kDone : kube::WatchStep::kContinue;
          },
          until);
      if (!failure.message.empty()) return failure;
      if (!watched && watched.error().exit != ExitCode::kTimeout)
        return watched.error();
    }
    if (done) return {};
    // The run's deadline has passed; looking at the cluster to say why gets
    // a deadline of its own.
    auto why = diagnose(ctx, **kube, *want, last_node,
                        ctx.host.clock().steady_now() + kDiagnosisTime);
    const auto have = last_node.is_null()
                          ? std::nullopt
                          : advertised(last_node, want->plan->resource);
    return Error{
        ExitCode::kTimeout, "allocatable",
        "node " + want->node + " did not advertise " + want->plan->resource +
            ": " + std::to_string(want->count()) +
            " before the deadline (it advertises " +
            (have ? std::to_string(*have) : std::string("none")) + ")" +
            (why ? "; lowest broken layer: [" + why->layer + "] " + why->message
                 : ""),
        why ? why->fix
            : "kubectl -n kube-system describe pods -l "
              "name=nvidia-device-plugin-ds"};
  }

 private:
  static Check as_blocked(Context& ctx, const Error& e) {
    return cluster_blocked(ctx, e, "allocatable.blocked");
  }

  static Result<Expectation> expectation(Context& ctx) {
    Expectation want;
    auto node = ctx.node();
    if (!node) return node.error();
    want.node = *node;
    auto plan = ctx.plugin_plan();
    if (!plan) return plan.error();
    want.plan = *plan;
    // What the driver layer counts, whether or not its stage ran.
    auto gpus = ctx.gpus();
    if (!gpus) {
      return Error{
          ExitCode::kBlocked, "allocatable",
          "cannot tell how many GPUs to expect: " + gpus.error().message,
          gpus.error().fix};
    }
    want.gpus = static_cast<int>((*gpus)->gpus.size());
    return want;
  }

  static std::string pods_path(const Expectation& want) {
    return std::string("/api/v1/namespaces/") + kPluginNamespace +
           "/pods?labelSelector=name%3Dnvidia-device-plugin-ds&fieldSelector="
           "spec.nodeName%3D" +
           want.node;
  }

  // The plugin reads its config once, at start: only a pod made from the
  // current template (same config digest) advertises the current config.
  static Result<bool> pods_current(kube::Client& kube, const Expectation& want,
                                   Deadline deadline) {
    auto pods = kube.list(pods_path(want), deadline);
    if (!pods) return pods.error();
    for (const auto& pod : pods->value("items", json::array())) {
      const auto annotations =
          pod["metadata"].value("annotations", json::object());
      if (annotations.value(kConfigHashAnnotation, "") ==
              want.plan->config_hash &&
          pod["status"].value("phase", "") == "Running" &&
          !pod["metadata"].contains("deletionTimestamp")) {
        return true;
      }
    }
    return false;
  }

  static std::string events_about(kube::Client& kube, const std::string& name,
                                  Deadline deadline) {
    auto events =
        kube.list(std::string("/api/v1/namespaces/") + kPluginNamespace +
                      "/events?fieldSelector=involvedObject.name%3D" + name,
                  deadline);
    std::string text;
    if (!events) return text;
    for (const auto& e : events->value("items", json::array())) {
      text += e.value("reason", "") + ": " + e.value("message", "") + "\n";
    }
    return text;
  }

  // Bottom-up: the first layer whose trouble shows in the cluster.
  static std::optional<Diagnosis> diagnose(Context& ctx, kube::Client& kube,
                                           const Expectation& want,
                                           const json& node,
                                           Deadline deadline) {
    auto ds = kube.get(daemonset_path(), deadline);
    if (!ds) return Diagnosis{"cluster", ds.error().message, ds.error().fix};
    if (!*ds) {
      return Diagnosis{"plugin", "the device plugin DaemonSet is not installed",
                       "gpunode install (without --skip plugin)"};
    }
    auto pods = kube.list(pods_path(want), deadline);
    if (!pods)
      return Diagnosis{"cluster", pods.error().message, pods.error().fix};
    const auto items = pods->value("items", json::array());
    if (items.empty()) {
      const std::string events = events_about(kube, kPluginDaemonSet, deadline);
      if (events.find("RuntimeClass") != std::string::npos) {
        return Diagnosis{
            "runtimeclass",
            "the DaemonSet cannot create its pod: " + first_line(events),
            "gpunode install (the runtimeclass stage creates it)"};
      }
      return Diagnosis{"plugin",
                       "no device plugin pod is scheduled on node " +
                           want.node +
                           (events.empty() ? "" : ": " + first_line(events)),
                       "kubectl -n kube-system describe daemonset " +
                           std::string(kPluginDaemonSet)};
    }
    const json& pod = items.front();
    const std::string pod_name = pod["metadata"].value("name", "");
    const std::string events = events_about(kube, pod_name, deadline);
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
      auto log =
          kube.get_text(std::string("/api/v1/namespaces/") + kPluginNamespace +
                            "/pods/" + pod_name + "/log?tailLines=20",
                        deadline);
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
    const auto annotations =
        pod["metadata"].value("annotations", json::object());
    if (annotations.value(kConfigHashAnnotation, "") !=
        want.plan->config_hash) {
      return Diagnosis{"plugin",
                       "plugin pod " + pod_name +
                           " still runs the previous config (the plugin "
                           "reads it only at start)",
                       "kubectl -n kube-system rollout restart ds/" +
                           std::string(kPluginDaemonSet)};
    }
    if (count == 0) {
      auto log =
          kube.get_text(std::string("/api/v1/namespaces/") + kPluginNamespace +
                            "/pods/" + pod_name + "/log?tailLines=20",
                        deadline);
      const bool nvml = log && log->find("NVML") != std::string::npos;
      return Diagnosis{
          nvml ? "handler" : "plugin",
          "plugin pod " + pod_name + " runs but advertises no GPU" +
              (log ? ": " + last_line(*log) : ""),
          nvml
              ? "check the handler layer: gpunode status --only toolkit,handler"
              : "kubectl -n kube-system logs " + pod_name};
    }
    if (count < want.count()) {
      return Diagnosis{"driver",
                       "node advertises " + std::to_string(count) + " of " +
                           std::to_string(want.count()) +
                           ": a GPU is unhealthy or in MIG mode",
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

  static std::string first_line(const std::string& s) {
    return s.substr(0, s.find('\n'));
  }
  static std::string last_line(std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    const std::size_t nl = s.rfind('\n');
    return nl == std::string::npos ? s : s.substr(nl + 1);
  }
};

}  // namespace

std::unique_ptr<Stage> make_allocatable_stage() {
  return std::make_unique<AllocatableStage>();
}

}  // namespace gpunode
