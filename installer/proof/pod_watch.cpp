#include "proof/pod_watch.hpp"

#include <algorithm>

#include "gpunode/interrupt.hpp"
#include "gpunode/terminal_text.hpp"
#include "proof/proof_pod.hpp"

namespace gpunode {

namespace {

using kube::json;

// How often the watch stops to read the Pod's events: a sandbox that
// cannot be made shows only there (the kubelet leaves the Pod Pending,
// unchanged, and retries), so the watch alone would wait out --timeout.
constexpr std::chrono::seconds kEventsEvery(2);
// How long an Unschedulable Pod is given before the proof ends. The
// scheduler retries it only on a cluster event that could make it fit (a
// pod deleted, a node changed), else after 5 minutes in the unschedulable
// queue (DefaultPodMaxInUnschedulablePodsDuration, pkg/scheduler/internal/
// queue, backend/queue since 1.32): a node with no free slot now keeps none
// free within a proof unless a pod ends. The grace covers just that: a pod
// that ended a moment ago (the previous proof Pod, deleted) and is still
// being removed.
constexpr std::chrono::seconds kUnschedulableGrace(10);

}  // namespace

std::chrono::steady_clock::time_point grace_after(Context& ctx) {
  return std::max(ctx.deadline,
                  ctx.host.clock().steady_now() + std::chrono::seconds(10));
}

PodOutcome watch_pod_to_end(Context& ctx, kube::Client& kube,
                            const SmokeSubject& subject) {
  const std::string path = std::string("/api/v1/namespaces/") +
                           kProofNamespace + "/pods/" + subject.pod;
  Clock& clock = ctx.host.clock();
  std::string phase;
  json last = json::object();
  std::optional<SmokeCause> cause;
  // Since when the Pod has been Unschedulable (a plain pair: GCC 12
  // warns maybe-uninitialized on an optional time_point).
  bool unschedulable_seen = false;
  std::chrono::steady_clock::time_point unschedulable_since{};
  std::optional<Error> lost;  // the watch failed for good
  // The grace of an Unschedulable Pod, counted from the first sight.
  auto unschedulable_for_good = [&]() -> std::optional<SmokeCause> {
    auto no_fit = unschedulable(last, subject);
    if (!no_fit) {
      unschedulable_seen = false;
      return std::nullopt;
    }
    if (!unschedulable_seen) {
      unschedulable_seen = true;
      unschedulable_since = clock.steady_now();
    }
    if (clock.steady_now() - unschedulable_since < kUnschedulableGrace)
      return std::nullopt;
    return no_fit;
  };
  auto on_pod = [&](const std::string&, const json& pod) {
    last = pod;
    phase = pod["status"].value("phase", "");
    if (phase == "Succeeded" || phase == "Failed")
      return kube::WatchStep::kDone;
    cause = cause_in_status(pod, subject);
    if (!cause) cause = unschedulable_for_good();
    if (cause) return kube::WatchStep::kDone;
    return kube::WatchStep::kContinue;
  };
  while (!cause) {
    const auto slice =
        std::min(ctx.deadline, clock.steady_now() + kEventsEvery);
    auto watched = kube.watch(
        std::string("/api/v1/namespaces/") + kProofNamespace + "/pods",
        "metadata.name=" + subject.pod, on_pod, slice);
    if (watched) break;  // it ended, or its status named a cause
    if (watched.error().exit != ExitCode::kTimeout ||
        clock.steady_now() >= ctx.deadline) {
      lost = watched.error();
      break;
    }
    cause = cause_in_events(
        read_pod_events(kube, kProofNamespace, subject.pod, ctx.deadline),
        subject);
    if (!cause) cause = unschedulable_for_good();
  }
  PodOutcome out;
  out.interrupted = lost && lost->exit == ExitCode::kInterrupted;
  // Read before the Pod goes (its events go with it, after the TTL),
  // with a little time of their own if the run's is spent; a stop signal
  // does not cut these short.
  InterruptShield finish_reading;
  const auto report_by = grace_after(ctx);
  out.events = read_pod_events(kube, kProofNamespace, subject.pod, report_by);
  auto log = kube.get_text(path + "/log", report_by);
  out.log = log ? *log : std::string();
  if (cause) {
    out.failure = cause;
    return out;
  }
  if (lost) {
    // Whatever the watch saw last may still name the layer.
    if (auto why = cause_in_events(out.events, subject)) {
      out.failure = why;
      return out;
    }
    if (auto why = unschedulable(last, subject)) {
      out.failure = why;
      return out;
    }
    std::string why;
    for (const auto& c : last.value("status", json::object())
                             .value("conditions", json::array())) {
      if (c.value("status", "") == "False" && c.contains("message"))
        why = c.value("message", "");
    }
    out.failure =
        SmokeCause{"smoke.unfinished", "smoke",
                   "the CUDA Pod " + subject.pod + " did not finish (phase " +
                       (phase.empty() ? "unknown" : terminal_safe(phase)) +
                       ")" + (why.empty() ? "" : ": " + terminal_safe(why)),
                   "gpunode status; kubectl describe pod " + subject.pod +
                       " while it runs",
                   lost->exit};
    return out;
  }
  if (phase != "Succeeded" || out.log.find("Test PASSED") == std::string::npos)
    out.failure = cause_of_end(last, phase, out.log, subject);
  return out;
}

}  // namespace gpunode
