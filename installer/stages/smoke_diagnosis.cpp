#include "stages/smoke_diagnosis.hpp"

#include "gpunode/terminal_text.hpp"

namespace gpunode {
namespace {

using kube::json;

// Where the scheduler's, kubelet's and API server's words are matched, the
// source that writes them is cited; a text that matches nothing is quoted.

// The cuda container's status (the Pod has only that one container).
json container_status(const json& pod) {
  for (const auto& cs : pod.value("status", json::object())
                            .value("containerStatuses", json::array())) {
    if (cs.value("name", "") == "cuda") return cs;
  }
  return json::object();
}

// The last `count` lines of `text`, without its trailing newlines.
std::string last_lines(std::string text, std::size_t count) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  std::size_t start = text.size();
  for (std::size_t n = 0; n < count && start != std::string::npos; ++n) {
    start = start == 0 ? std::string::npos : text.rfind('\n', start - 1);
  }
  text = start == std::string::npos ? text : text.substr(start + 1);
  constexpr std::size_t kMaxQuote = 400;
  return text.size() > kMaxQuote ? text.substr(text.size() - kMaxQuote) : text;
}

// The resource of the scheduler's "N Insufficient RESOURCE" (kube-scheduler,
// pkg/scheduler/framework/plugins/noderesources/fit.go: "Insufficient " +
// resource name; the reasons are joined by ", " and the list ends ".").
std::string insufficient_resource(const std::string& message) {
  const std::string needle = "Insufficient ";
  const std::size_t at = message.find(needle);
  if (at == std::string::npos) return {};
  const std::size_t from = at + needle.size();
  std::size_t to = message.find_first_of(", ", from);
  std::string name = message.substr(
      from, to == std::string::npos ? std::string::npos : to - from);
  while (!name.empty() && name.back() == '.') name.pop_back();
  return name;
}

}  // namespace

std::vector<PodEvent> read_pod_events(
    kube::Client& kube, const std::string& ns, const std::string& pod,
    std::chrono::steady_clock::time_point deadline) {
  auto listed =
      kube.list("/api/v1/namespaces/" + ns +
                    "/events?fieldSelector=involvedObject.name%3D" + pod,
                deadline);
  std::vector<PodEvent> events;
  if (!listed) return events;
  for (const auto& e : listed->value("items", json::array())) {
    events.push_back(
        {e.value("type", ""), e.value("reason", ""), e.value("message", "")});
  }
  return events;
}

json events_json(const std::vector<PodEvent>& events) {
  json out = json::array();
  for (const auto& e : events) {
    out.push_back(
        {{"reason", e.reason}, {"message", e.message}, {"type", e.type}});
  }
  return out;
}

std::vector<std::string> event_lines(const std::vector<PodEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    out.push_back("event " + terminal_safe(e.type) + " " +
                  terminal_safe(e.reason) + ": " + terminal_safe(e.message));
  }
  return out;
}

std::optional<SmokeCause> cause_in_status(const json& pod,
                                          const SmokeSubject& subject) {
  const json cs = container_status(pod);
  const json waiting =
      cs.value("state", json::object()).value("waiting", json::object());
  const std::string reason = waiting.value("reason", "");
  // The kubelet's image manager (pkg/kubelet/images/types.go: ErrImagePull,
  // ErrImageNeverPull; ImagePullBackOff while it backs off). An air-gapped
  // node cannot reach any registry: a pull never succeeds, so waiting only
  // spends --timeout.
  if (reason != "ErrImagePull" && reason != "ImagePullBackOff" &&
      reason != "ErrImageNeverPull") {
    return std::nullopt;
  }
  // The kubelet that pulls is the one of the node the scheduler bound the
  // Pod to (spec.nodeName): a run on a server sends it to a GPU agent, so
  // "this node" would send the operator to the wrong machine.
  const std::string node =
      terminal_safe(pod.value("spec", json::object()).value("nodeName", ""));
  const std::string there =
      node.empty() ? std::string("the node the Pod was scheduled on")
                   : "node " + node;
  SmokeCause cause{"smoke.image", "image",
                   "the CUDA Pod " + subject.pod + " is " +
                       terminal_safe(reason) + " on " + there + ": the image " +
                       subject.image +
                       " is not in k3s's containerd there, and an "
                       "air-gapped node will never pull it",
                   "on " + there + ": " + subject.import_fix};
  cause.node = node;
  return cause;
}

std::optional<SmokeCause> unschedulable(const json& pod,
                                        const SmokeSubject& subject) {
  for (const auto& c :
       pod.value("status", json::object()).value("conditions", json::array())) {
    // The scheduler's condition (k8s.io/api/core/v1 PodReasonUnschedulable:
    // "Unschedulable", set by pkg/scheduler/schedule_one.go on a failed
    // attempt).
    if (c.value("type", "") != "PodScheduled" ||
        c.value("status", "") != "False" ||
        c.value("reason", "") != "Unschedulable") {
      continue;
    }
    const std::string said = c.value("message", "");
    const std::string resource = insufficient_resource(said);
    const std::string where =
        subject.node.empty() ? std::string("NODE") : subject.node;
    return SmokeCause{
        "smoke.unschedulable", "allocatable",
        (resource.empty() ? "the CUDA Pod " + subject.pod + " fits no node"
                          : "no free " + terminal_safe(resource) +
                                " slot for the CUDA Pod " + subject.pod) +
            ": the scheduler says \"" + terminal_safe(said) + "\"",
        "see what holds the slots: kubectl describe node " + where +
            " (Allocated resources, Non-terminated Pods), or kubectl get "
            "pods -A -o wide --field-selector spec.nodeName=" +
            where + "; end one, or share the GPUs (--variant time-slicing)"};
  }
  return std::nullopt;
}

std::optional<SmokeCause> cause_in_events(const std::vector<PodEvent>& events,
                                          const SmokeSubject& subject) {
  for (const auto& e : events) {
    // pkg/kubelet/events/event.go: FailedCreatePodSandBox, the kubelet's
    // reason when the CRI's RunPodSandbox fails; it retries the same way
    // on every sync, so the first one says what every later one will.
    if (e.reason != "FailedCreatePodSandBox") continue;
    const std::string said = terminal_safe(e.message);
    const std::string start =
        "the CUDA Pod " + subject.pod + " gets no sandbox: ";
    // containerd's CRI plugin (sandbox_run.go, pkg/cri/server in 1.7):
    // "no runtime for %q is configured" when its config has no runtime of
    // that handler name: k3s wrote its containerd config before the toolkit
    // was there (the allocatable diagnosis knows the same text).
    if (e.message.find("no runtime for \"") != std::string::npos) {
      return SmokeCause{
          "smoke.handler", "handler", start + said,
          "sudo systemctl restart k3s (so k3s finds the NVIDIA runtime), or "
          "gpunode install --restart-k3s"};
    }
    // The kubelet resolves the handler from the RuntimeClass at sandbox
    // time (pkg/kubelet/runtimeclass/runtimeclass_manager.go): deleted
    // after the Pod was admitted.
    if (e.message.find("runtimeclass.node.k8s.io") != std::string::npos) {
      return SmokeCause{"smoke.runtimeclass", "runtimeclass", start + said,
                        "gpunode install (the runtimeclass stage applies "
                        "RuntimeClass nvidia)"};
    }
    // The handler is configured but its binary cannot run: the toolkit's.
    if (e.message.find("nvidia-container-runtime") != std::string::npos) {
      return SmokeCause{"smoke.toolkit", "toolkit", start + said,
                        "gpunode install (the toolkit stage installs the "
                        "NVIDIA container toolkit)"};
    }
    return SmokeCause{"smoke.sandbox", "handler", start + said,
                      "sudo k3s crictl pods; journalctl -u k3s (containerd's "
                      "log says more)"};
  }
  return std::nullopt;
}

std::optional<SmokeCause> cause_of_refusal(const Error& refused) {
  // plugin/pkg/admission/runtimeclass/admission.go (Validate): a Pod whose
  // runtimeClassName names no RuntimeClass is refused with 403 Forbidden,
  // "pod rejected: RuntimeClass %q not found".
  if (refused.status != 403 ||
      refused.message.find("pod rejected: RuntimeClass") == std::string::npos) {
    return std::nullopt;
  }
  return SmokeCause{"smoke.runtimeclass", "runtimeclass",
                    "the API server refused the CUDA Pod: RuntimeClass "
                    "\"nvidia\" not found (the RuntimeClass admission plugin)",
                    "gpunode install (the runtimeclass stage applies "
                    "RuntimeClass nvidia; not with --skip runtimeclass)"};
}

SmokeCause cause_of_end(const json& pod, const std::string& phase,
                        const std::string& log, const SmokeSubject& subject) {
  const json ended = container_status(pod)
                         .value("state", json::object())
                         .value("terminated", json::object());
  std::string how;
  if (ended.contains("exitCode") && ended["exitCode"].is_number_integer()) {
    how = " (exit code " + std::to_string(ended["exitCode"].get<int>()) + ")";
  }
  const std::string tail = last_lines(log, 5);
  return SmokeCause{"smoke.failed", "smoke",
                    "the CUDA Pod " + subject.pod + " ended " +
                        terminal_safe(phase) + how +
                        " without \"Test PASSED\"" +
                        (tail.empty() ? "" : ": " + terminal_safe(tail)),
                    "gpunode status (every layer below must be satisfied)"};
}

}  // namespace gpunode
