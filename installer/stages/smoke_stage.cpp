// smoke (--smoke): the only check that proves the whole chain works. A Pod
// with runtimeClassName nvidia asking for one GPU slot runs the CUDA
// vectorAdd sample to completion; its log must say "Test PASSED". The Pod
// is deleted whatever happens. A cause that waiting will not cure (the
// image missing, no sandbox, no free slot) ends the watch at once, named
// by its layer (stages/smoke_diagnosis.hpp).
#include <optional>
#include <random>
#include <vector>

#include "gpunode/terminal_text.hpp"
#include "gpunode/text.hpp"
#include "kube/manifests.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "run/cluster_facts.hpp"
#include "stages/smoke_diagnosis.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using kube::json;

constexpr const char* kNamespace = "default";

// How often the watch stops to read the Pod's events: a sandbox that
// cannot be made shows only there (the kubelet leaves the Pod Pending,
// unchanged, and retries), so the watch alone would wait out --timeout.
constexpr std::chrono::seconds kEventsEvery(2);
// How long an Unschedulable Pod is given before the stage ends. The
// scheduler retries it only on a cluster event that could make it fit (a
// pod deleted, a node changed), else after 5 minutes in the unschedulable
// queue (DefaultPodMaxInUnschedulablePodsDuration, pkg/scheduler/internal/
// queue, backend/queue since 1.32): a node with no free slot now keeps none
// free within a smoke run unless a pod ends. The grace covers just that: a
// pod that ended a moment ago (the previous smoke Pod, deleted) and is
// still being removed.
constexpr std::chrono::seconds kUnschedulableGrace(10);

class SmokeStage : public Stage {
 public:
  std::string_view name() const override { return "smoke"; }
  std::string_view layer() const override { return "Pod resource limit"; }

  std::string inputs(Context& ctx) const override {
    return "smoke_image=" + ctx.opts.smoke_image + "\n";
  }

  // A smoke test is an action, not a state: --smoke (or --only smoke).
  bool opt_in() const override { return true; }
  // It creates a Pod: a node's own identity may create only mirror pods
  // (NodeRestriction), and a run of the cluster part alone has no GPUs of
  // its own to try. A single node's run of both parts has both.
  StagePart part() const override { return StagePart::kWholeRun; }
  bool asked_for(const Options& opts) const override { return opts.smoke; }

  Check check(Context& ctx) override {
    Check c = verdict(ctx);
    // docs/json-events.md, smoke: the Pod of this invocation (null until
    // one ran), its image, "passed" once it printed Test PASSED, the layer
    // a failed run names, the node its cause is on, and the Pod's events
    // read before its deletion.
    c.facts["pod"] =
        pod_.empty() ? nlohmann::json(nullptr) : nlohmann::json(pod_);
    c.facts["image"] = ctx.opts.smoke_image;
    c.facts["result"] =
        passed_.empty() ? nlohmann::json(nullptr) : nlohmann::json("passed");
    c.facts["layer"] =
        failure_ ? nlohmann::json(failure_->layer) : nlohmann::json(nullptr);
    c.facts["node"] = failure_ && !failure_->node.empty()
                          ? nlohmann::json(failure_->node)
                          : nlohmann::json(nullptr);
    c.facts["events"] = events_json(events_);
    c.details = event_lines(events_);
    return c;
  }

  // A Pod that ran and failed is not an error of apply(): the check after
  // it reports the cause, with the Pod's events as its details. Errors are
  // for a Pod that could not be had at all.
  Result<void> apply(Context& ctx, const Check&) override {
    auto kube = ctx.cluster();
    if (!kube) return kube.error();
    auto plan = ctx.plugin_plan();
    if (!plan) return plan.error();
    std::mt19937 rng(std::random_device{}());
    const std::string name = "gpunode-smoke-" + std::to_string(rng() % 100000);
    pod_ = name;
    const std::string path =
        std::string("/api/v1/namespaces/") + kNamespace + "/pods/" + name;
    json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", name},
          {"namespace", kNamespace},
          {"labels", {{kManagedByLabel, "gpunode"}}}}},
        {"spec",
         {{"restartPolicy", "Never"},
          {"runtimeClassName", "nvidia"},
          {"tolerations", json::array({{{"key", "nvidia.com/gpu"},
                                        {"operator", "Exists"},
                                        {"effect", "NoSchedule"}}})},
          {"containers",
           json::array(
               {{{"name", "cuda"},
                 {"image", ctx.opts.smoke_image},
                 {"resources",
                  {{"limits", (*plan)->exposure->smoke_limits()}}}}})}}}};
    auto created = (*kube)->create(
        std::string("/api/v1/namespaces/") + kNamespace + "/pods", pod,
        ctx.deadline);
    if (!created) {
      pod_.clear();  // none was made: nothing to delete
      if (auto refused = cause_of_refusal(created.error()))
        return Error{refused->exit, refused->layer, refused->message,
                     refused->fix, created.error().status};
      return created.error();
    }
    failure_ = watch_and_read(ctx, **kube, subject(ctx, name), path);
    if (!failure_)
      passed_ =
          "CUDA Pod " + name + " ran on a GPU slot: Test PASSED (Pod deleted)";
    // Always clean up, with a little time of its own if the run's is spent.
    (void)(*kube)->remove(path, grace_after(ctx));
    return {};
  }

 private:
  std::string passed_;  // set once this run's Pod passed
  std::string pod_;     // the Pod this invocation created, if any
  std::optional<SmokeCause> failure_;  // why this run's Pod did not pass
  std::vector<PodEvent> events_;       // the Pod's, read before its deletion

  // The run's deadline, or 10 s from now once it has passed: what the
  // report's reads and the Pod's deletion get.
  static std::chrono::steady_clock::time_point grace_after(Context& ctx) {
    return std::max(ctx.deadline,
                    ctx.host.clock().steady_now() + std::chrono::seconds(10));
  }

  Check verdict(Context& ctx) const {
    if (!passed_.empty()) return satisfied("smoke.ok", passed_);
    if (failure_) {
      return blocked(failure_->code, failure_->layer + ": " + failure_->message,
                     failure_->fix, failure_->exit);
    }
    // A smoke test is an action, not a state: asked for, it always runs.
    auto plan = ctx.plugin_plan();
    if (!plan)
      return blocked("smoke.render", plan.error().message, plan.error().fix);
    return needed("smoke.run", "a CUDA Pod has not been run in this invocation",
                  "run " + ctx.opts.smoke_image +
                      " in a Pod with runtimeClassName nvidia and " +
                      (*plan)->resource + ": 1, read its log, delete it");
  }

  // What the diagnosis says about the image's import: the bundle's archive
  // of it when the bundle carries one, else what to import by hand. The
  // image stage imports the bundle's with --smoke, so a Pod that still
  // lacks it ran on another node, or the image stage was skipped.
  static SmokeSubject subject(Context& ctx, const std::string& pod) {
    SmokeSubject s{pod, ctx.opts.smoke_image, {}, {}};
    auto bundle = ctx.bundle();
    const std::string archive =
        bundle && *bundle ? (*bundle)->smoke_archive : std::string();
    s.import_fix =
        archive.empty()
            ? "import an archive of " + s.image +
                  " into k3s's containerd: sudo k3s ctr -n k8s.io images "
                  "import FILE.tar (gpunode bundle create --pull " +
                  s.image + " puts one in a bundle's images/)"
            : "sudo k3s ctr -n k8s.io images import " + shell_word(archive) +
                  " (the bundle's archive of " + s.image + ")";
    auto node = ctx.node();
    if (node) s.node = *node;
    return s;
  }

  // Watches the Pod until it ends or a cause shows that waiting will not
  // cure, in slices of kEventsEvery with the events read between them;
  // then reads the events and the log for the report. nullopt: it passed.
  std::optional<SmokeCause> watch_and_read(Context& ctx, kube::Client& kube,
                                           const SmokeSubject& subject,
                                           const std::string& path) {
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
      auto watched =
          kube.watch(std::string("/api/v1/namespaces/") + kNamespace + "/pods",
                     "metadata.name=" + subject.pod, on_pod, slice);
      if (watched) break;  // it ended, or its status named a cause
      if (watched.error().exit != ExitCode::kTimeout ||
          clock.steady_now() >= ctx.deadline) {
        lost = watched.error();
        break;
      }
      cause = cause_in_events(
          read_pod_events(kube, kNamespace, subject.pod, ctx.deadline),
          subject);
      if (!cause) cause = unschedulable_for_good();
    }
    // Read before the Pod goes (its events go with it, after the TTL),
    // with a little time of their own if the run's is spent.
    const auto report_by = grace_after(ctx);
    events_ = read_pod_events(kube, kNamespace, subject.pod, report_by);
    auto log = kube.get_text(path + "/log", report_by);
    const std::string text = log ? *log : std::string();
    if (cause) return cause;
    if (lost) {
      // Whatever the watch saw last may still name the layer.
      if (auto why = cause_in_events(events_, subject)) return why;
      if (auto why = unschedulable(last, subject)) return why;
      std::string why;
      for (const auto& c : last.value("status", json::object())
                               .value("conditions", json::array())) {
        if (c.value("status", "") == "False" && c.contains("message"))
          why = c.value("message", "");
      }
      return SmokeCause{
          "smoke.unfinished", "smoke",
          "the CUDA Pod " + subject.pod + " did not finish (phase " +
              (phase.empty() ? "unknown" : terminal_safe(phase)) + ")" +
              (why.empty() ? "" : ": " + terminal_safe(why)),
          "gpunode status; kubectl describe pod " + subject.pod +
              " while it runs",
          lost->exit};
    }
    if (phase != "Succeeded" || text.find("Test PASSED") == std::string::npos)
      return cause_of_end(last, phase, text, subject);
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<Stage> make_smoke_stage() {
  return std::make_unique<SmokeStage>();
}

}  // namespace gpunode
