// smoke (--smoke): the only check that proves the whole chain works. A Pod
// with runtimeClassName nvidia asking for one GPU slot runs the CUDA
// vectorAdd sample to completion; its log must say "Test PASSED". The Pod
// is deleted whatever happens.
#include <random>

#include "kube/manifests.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "run/cluster_facts.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using kube::json;

constexpr const char* kNamespace = "default";

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
  bool runs_in(Scope scope) const override { return scope == Scope::kBoth; }
  bool asked_for(const Options& opts) const override { return opts.smoke; }

  Check check(Context& ctx) override {
    Check c = verdict(ctx);
    // docs/json-events.md, smoke: the Pod of this invocation (null until
    // one ran), its image, and "passed" once it printed Test PASSED.
    c.facts["pod"] =
        pod_.empty() ? nlohmann::json(nullptr) : nlohmann::json(pod_);
    c.facts["image"] = ctx.opts.smoke_image;
    c.facts["result"] =
        passed_.empty() ? nlohmann::json(nullptr) : nlohmann::json("passed");
    return c;
  }

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
                 {"resources", {{"limits", {{(*plan)->resource, 1}}}}}}})}}}};
    auto created = (*kube)->create(
        std::string("/api/v1/namespaces/") + kNamespace + "/pods", pod,
        ctx.deadline);
    if (!created) return created.error();
    Result<void> outcome = wait_and_read(ctx, **kube, name, path);
    if (outcome)
      passed_ =
          "CUDA Pod " + name + " ran on a GPU slot: Test PASSED (Pod deleted)";
    // Always clean up, with a little time of its own if the run's is spent.
    (void)(*kube)->remove(path,
                          std::max(ctx.deadline, ctx.host.clock().steady_now() +
                                                     std::chrono::seconds(10)));
    return outcome;
  }

 private:
  std::string passed_;  // set once this run's Pod passed
  std::string pod_;     // the Pod this invocation created, if any

  Check verdict(Context& ctx) const {
    if (!passed_.empty()) return satisfied("smoke.ok", passed_);
    // A smoke test is an action, not a state: asked for, it always runs.
    auto plan = ctx.plugin_plan();
    if (!plan)
      return blocked("smoke.render", plan.error().message, plan.error().fix);
    return needed("smoke.run", "a CUDA Pod has not been run in this invocation",
                  "run " + ctx.opts.smoke_image +
                      " in a Pod with runtimeClassName nvidia and " +
                      (*plan)->resource + ": 1, read its log, delete it");
  }

  static Result<void> wait_and_read(Context& ctx, kube::Client& kube,
                                    const std::string& name,
                                    const std::string& path) {
    std::string phase, why;
    auto watched = kube.watch(
        std::string("/api/v1/namespaces/") + kNamespace + "/pods",
        "metadata.name=" + name,
        [&](const std::string&, const json& pod) {
          phase = pod["status"].value("phase", "");
          for (const auto& c :
               pod["status"].value("conditions", json::array())) {
            if (c.value("status", "") == "False" && c.contains("message")) {
              why = c.value("message", "");
            }
          }
          return phase == "Succeeded" || phase == "Failed"
                     ? kube::WatchStep::kDone
                     : kube::WatchStep::kContinue;
        },
        ctx.deadline);
    auto log = kube.get_text(path + "/log", ctx.deadline);
    const std::string text = log ? *log : std::string();
    if (!watched) {
      return Error{
          watched.error().exit, "smoke",
          "the CUDA Pod " + name + " did not finish (phase " +
              (phase.empty() ? "unknown" : phase) + ")" +
              (why.empty() ? "" : ": " + why),
          "gpunode status; kubectl describe pod " + name + " while it runs"};
    }
    if (phase != "Succeeded" || text.find("Test PASSED") == std::string::npos) {
      return Error{ExitCode::kBlocked, "smoke",
                   "the CUDA Pod " + name + " ended " + phase +
                       " without \"Test PASSED\"" +
                       (text.empty() ? "" : ": " + text.substr(0, 400)),
                   "gpunode status (every layer below must be satisfied)"};
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<Stage> make_smoke_stage() {
  return std::make_unique<SmokeStage>();
}

}  // namespace gpunode
