// Why the smoke stage's CUDA Pod is not running, read from the Pod and its
// events while it is watched: the layer a failure belongs to and its fix,
// so a cause that will not go away ends the stage at once instead of at
// --timeout. Pure functions over the API's objects; the stage does the
// requests.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/kube.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

// One Event about the Pod (core/v1 Event: type Normal or Warning, reason,
// message), as the API server holds it: untrusted text.
struct PodEvent {
  std::string type;
  std::string reason;
  std::string message;
};

// A cause found: the layer it belongs to (the stage that owns it: "image",
// "runtimeclass", "handler", "allocatable"; "smoke" for the CUDA program
// itself), what is wrong and the fix.
struct SmokeCause {
  std::string code;  // the check's code, "smoke.image", ...
  std::string layer;
  std::string message;
  std::string fix;
  ExitCode exit = ExitCode::kBlocked;
  // The node the Pod was scheduled on (spec.nodeName) when the cause is
  // there: not always the node gpunode runs on (a server's smoke run).
  std::string node{};
};

// What the diagnosis needs besides the Pod: the image the Pod runs and the
// command that puts it into k3s's containerd; the node (for the fix of a
// slot held elsewhere).
struct SmokeSubject {
  std::string pod;
  std::string image;
  std::string import_fix;
  std::string node;
};

// The Pod's events (GET .../events?fieldSelector=involvedObject.name=POD),
// oldest first; none when they cannot be read (the node's own identity may
// not list events: the report just says less).
std::vector<PodEvent> read_pod_events(
    kube::Client& kube, const std::string& ns, const std::string& pod,
    std::chrono::steady_clock::time_point deadline);

// The events as the report's facts: [{reason, message, type}].
kube::json events_json(const std::vector<PodEvent>& events);
// ... and as the check's details, one line each, control characters
// escaped: "event Warning Failed: ...".
std::vector<std::string> event_lines(const std::vector<PodEvent>& events);

// A cause the Pod's status shows that waiting will not cure: the image is
// not on the node the Pod was scheduled on (ErrImagePull, ImagePullBackOff,
// ErrImageNeverPull); the message and the fix name that node.
std::optional<SmokeCause> cause_in_status(const kube::json& pod,
                                          const SmokeSubject& subject);

// The scheduler's "no node fits" (PodScheduled False, reason
// Unschedulable), or nullopt while the Pod is scheduled or not yet tried.
std::optional<SmokeCause> unschedulable(const kube::json& pod,
                                        const SmokeSubject& subject);

// A cause only the events show: the kubelet's FailedCreatePodSandBox
// (the Pod's status stays Pending, ContainerCreating, meanwhile).
std::optional<SmokeCause> cause_in_events(const std::vector<PodEvent>& events,
                                          const SmokeSubject& subject);

// The create refused by the RuntimeClass admission plugin, or nullopt for
// any other refusal.
std::optional<SmokeCause> cause_of_refusal(const Error& refused);

// A Pod that ended Failed, or Succeeded without "Test PASSED": its
// container's exit code and the last lines of its log.
SmokeCause cause_of_end(const kube::json& pod, const std::string& phase,
                        const std::string& log, const SmokeSubject& subject);

}  // namespace gpunode
