// smoke (--smoke, or `gpunode prove`): the proof that the whole chain works,
// on every physical GPU of every GPU node the run's cluster part covers.
// Each node gets proof Pods (runtimeClassName nvidia, one slot each, placed
// on it) until each GPU it published has run the CUDA sample to "Test
// PASSED" (proof/gpu_proof.hpp); a GPU never reached, or on which CUDA
// failed, is named. A cause below the GPUs (the image missing, no sandbox,
// no free slot) ends that node's proof at once, named by its layer
// (stages/smoke_diagnosis.hpp). Every Pod is deleted whatever happens. On a
// host that has DCGM, with the node part, its diagnostic runs too
// (proof/dcgm_diag.hpp).
#include <random>
#include <vector>

#include "evidence/evidence_collect.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/state_dir.hpp"
#include "gpunode/text.hpp"
#include "gpunode/utc_time.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "plugin/gpu_nodes.hpp"
#include "plugin/slot_expectation.hpp"
#include "proof/dcgm_diag.hpp"
#include "proof/gpu_proof.hpp"
#include "stages/smoke_diagnosis.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using kube::json;

class SmokeStage : public Stage {
 public:
  std::string_view name() const override { return "smoke"; }
  std::string_view layer() const override { return "Pod resource limit"; }

  std::string inputs(Context& ctx) const override {
    return "smoke_image=" + ctx.opts.smoke_image +
           "\nproof=" + proof_depth_name(ctx.opts.proof) + "\n";
  }

  // A proof is an action, not a state: --smoke, `prove` (or --only smoke).
  bool opt_in() const override { return true; }
  // It creates Pods on every GPU node: the cluster part's admin identity
  // may; a node's own may create only mirror pods (NodeRestriction).
  StagePart part() const override { return StagePart::kClusterAction; }
  bool asked_for(const Options& opts) const override { return opts.smoke; }

  Check check(Context& ctx) override {
    Check c = verdict(ctx);
    // docs/json-events.md, smoke.
    c.facts["pod"] = last_pod_.empty() ? json(nullptr) : json(last_pod_);
    c.facts["image"] = ctx.opts.smoke_image;
    c.facts["proof"] = proof_depth_name(ctx.opts.proof);
    c.facts["result"] = ran_ ? json(passed() ? "passed" : "failed") : json();
    const SmokeCause* first = first_stop();
    c.facts["layer"] = first ? json(first->layer) : json(nullptr);
    c.facts["node"] =
        first && !first->node.empty() ? json(first->node) : json(nullptr);
    // The events of the Pod that met a cause, else of the last Pod run.
    std::vector<PodEvent> events;
    for (const NodeProof& p : proofs_)
      if (!p.events.empty() && (events.empty() || p.stopped)) events = p.events;
    c.facts["events"] = events_json(events);
    c.facts["nodes"] = json::array();
    c.facts["gpus"] = json::array();
    for (const NodeProof& p : proofs_) {
      c.facts["nodes"].push_back(
          {{"node", p.node},
           {"uuids_published", p.uuids_published},
           {"pods", p.pods},
           {"passed", p.with_result("passed").size()},
           {"failed", p.with_result("failed").size()},
           {"unreached", p.with_result("unreached").size()},
           {"took_ms", p.took.count()},
           {"code", p.stopped ? json(p.stopped->code) : json(nullptr)}});
      for (const GpuProof& g : p.gpus)
        c.facts["gpus"].push_back(
            {{"node", p.node},
             {"uuid", g.uuid},
             {"result", g.result},
             {"pod", g.pod.empty() ? json(nullptr) : json(g.pod)},
             {"at", g.at.empty() ? json(nullptr) : json(g.at)},
             {"message", g.message.empty() ? json(nullptr) : json(g.message)}});
    }
    c.facts["dcgm"] = dcgm_json();
    c.details = event_lines(events);
    for (const NodeProof& p : proofs_) {
      for (const GpuProof& g : p.gpus)
        c.details.push_back("GPU " + g.uuid + " on " + p.node + ": " +
                            g.result +
                            (g.pod.empty() ? "" : " (" + g.pod + ")"));
    }
    if (dcgm_) c.details.push_back(dcgm_->message);
    return c;
  }

  // A Pod that ran and failed is not an error of apply(): the check after
  // it reports the cause. Errors are for the Pods that could not be had at
  // all, and for a stop signal (every Pod is deleted first).
  Result<void> apply(Context& ctx, const Check&) override {
    auto kube = ctx.cluster();
    if (!kube) return kube.error();
    auto plan = ctx.plugin_plan();
    if (!plan) return plan.error();
    auto slots = ctx.expected_slots();
    if (!slots) return slots.error();
    ran_ = true;
    std::mt19937 rng(std::random_device{}());
    const ProofSetup setup{"gpunode-smoke-" + std::to_string(rng() % 100000),
                           ctx.opts.smoke_image, (*plan)->resource,
                           (*plan)->exposure->smoke_limits(), import_fix(ctx)};
    const int per_gpu = static_cast<int>((*plan)->slots_for(1));
    for (const NodeExpectation& n : (*slots)->listed) {
      // Its count label, else what it advertises (served by an earlier
      // install, before the labels).
      const int gpus =
          n.gpus ? *n.gpus : static_cast<int>(n.now / std::max(1, per_gpu));
      if (gpus <= 0) continue;  // not a GPU node (yet)
      const ProofTarget target{n.node, n.uuids, gpus, per_gpu};
      proofs_.push_back(prove_node(ctx, **kube, target, setup));
      if (!proofs_.back().last_pod.empty()) last_pod_ = proofs_.back().last_pod;
      if (proofs_.back().interrupted) return interrupted_error("smoke");
      if (proofs_.back().error) return *proofs_.back().error;
    }
    if (ctx.carries_node_part()) {
      const int level = ctx.opts.proof == ProofDepth::kDeep ? 2 : 1;
      const auto bound = std::chrono::milliseconds(std::min<long long>(
          ctx.time_left().count(), level == 1 ? 120000 : 900000));
      dcgm_ = run_dcgm_diag(ctx.host.proc(), level, bound);
      if (stop_requested()) return interrupted_error("smoke");
    }
    return record(ctx);
  }

 private:
  bool ran_ = false;
  std::vector<NodeProof> proofs_;
  std::string last_pod_;  // the last Pod this invocation ran, if any
  std::optional<DcgmDiag> dcgm_;

  // The last proof on this host, for the evidence records of the nodes it
  // covered (evidence/evidence_collect.hpp): the facts, and when.
  Result<void> record(Context& ctx) {
    if (ctx.previewing()) return {};
    const Check c = check(ctx);
    const json proof = {{"at", iso8601_utc(ctx.host.clock().now())},
                        {"image", c.facts["image"]},
                        {"proof", c.facts["proof"]},
                        {"result", c.facts["result"]},
                        {"nodes", c.facts["nodes"]},
                        {"gpus", c.facts["gpus"]},
                        {"dcgm", c.facts["dcgm"]}};
    // A proof that ran is not undone by a record that cannot be kept.
    auto kept = prepare_state_dir(ctx.host.fs(), ctx.opts.state_dir);
    if (kept)
      kept = ctx.host.fs().write_file_atomic(
          proof_record_path(ctx.opts.state_dir), proof.dump(2) + "\n", 0644);
    if (!kept)
      ctx.notice("smoke", "the proof is not kept for evidence records: " +
                              kept.error().message);
    return {};
  }

  bool passed() const {
    if (proofs_.empty()) return false;
    for (const NodeProof& p : proofs_)
      if (!p.ok()) return false;
    return !dcgm_ || !dcgm_->failed();
  }

  const SmokeCause* first_stop() const {
    for (const NodeProof& p : proofs_)
      if (p.stopped) return &*p.stopped;
    return nullptr;
  }

  json dcgm_json() const {
    if (!dcgm_) return nullptr;
    json gpus = json::object();
    for (const auto& [id, status] : dcgm_->gpus) gpus[id] = status;
    return {{"state", dcgm_->state},
            {"level", dcgm_->level},
            {"message", dcgm_->message},
            {"tests", dcgm_->tests},
            {"gpus", gpus}};
  }

  Check verdict(Context& ctx) const {
    if (!ran_) {
      // A proof is an action, not a state: asked for, it always runs.
      auto plan = ctx.plugin_plan();
      if (!plan)
        return blocked("smoke.render", plan.error().message, plan.error().fix);
      return needed(
          "smoke.run", "the GPUs have not been proven in this invocation",
          "run " + ctx.opts.smoke_image +
              " in Pods with runtimeClassName nvidia and " + (*plan)->resource +
              ": 1 on every GPU of every GPU node, read their "
              "logs, delete them");
    }
    if (proofs_.empty())
      return blocked("smoke.no-gpu-nodes",
                     "no GPU node to prove: none is labelled " +
                         std::string("nvidia.com/gpu.present=true"),
                     "gpunode install on each GPU node first (its node part "
                     "labels it)");
    if (const SmokeCause* why = first_stop())
      return blocked(why->code, why->layer + ": " + why->message, why->fix,
                     why->exit);
    for (const NodeProof& p : proofs_) {
      const auto failed = p.with_result("failed");
      if (!failed.empty()) {
        std::string message;
        for (const GpuProof& g : p.gpus)
          if (g.result == "failed") message = g.message;
        return blocked("smoke.gpu-failed",
                       "GPU " + join(failed) + " on node " + p.node +
                           " failed the CUDA sample: " + message,
                       "nvidia-smi -q -i " + failed.front() + " on " + p.node +
                           " (ECC, XID in dmesg); take the GPU out of "
                           "service until it passes");
      }
    }
    for (const NodeProof& p : proofs_) {
      const auto never = p.with_result("unreached");
      const long long seen =
          static_cast<long long>(p.gpus.size() - never.size());
      if (!never.empty() || (!p.uuids_published && p.gpus.empty()) || !p.ok()) {
        return blocked(
            "smoke.unreached",
            "node " + p.node + ": " +
                (never.empty() ? std::to_string(seen) +
                                     " GPU(s) proven, fewer than it has"
                               : "GPU " + join(never)) +
                " never ran a proof Pod (" + std::to_string(p.pods) +
                " Pod(s) run)",
            "kubectl describe node " + p.node +
                " (what it advertises and what holds its slots); gpunode "
                "prove again once its slots are free");
      }
    }
    if (dcgm_ && dcgm_->failed())
      return blocked("smoke.dcgm", dcgm_->message,
                     "dcgmi diag -r " + std::to_string(dcgm_->level) +
                         " for each test's details");
    std::size_t gpus = 0;
    int pods = 0;
    for (const NodeProof& p : proofs_) {
      gpus += p.gpus.size();
      pods += p.pods;
    }
    return satisfied(
        "smoke.ok",
        "every GPU passed the CUDA sample: " + std::to_string(gpus) +
            " GPU(s) on " + std::to_string(proofs_.size()) + " node(s), " +
            std::to_string(pods) + " Pod(s), deleted" +
            (dcgm_ ? "; " + dcgm_->message : ""));
  }

  // What the diagnosis says about the image's import: the bundle's archive
  // of it when the bundle carries one, else what to import by hand. The
  // image stage imports the bundle's with --smoke, so a Pod that still
  // lacks it ran on another node, or the image stage was skipped.
  static std::string import_fix(Context& ctx) {
    auto bundle = ctx.bundle();
    const std::string archive =
        bundle && *bundle ? (*bundle)->smoke_archive : std::string();
    const std::string& image = ctx.opts.smoke_image;
    return archive.empty()
               ? "import an archive of " + image +
                     " into k3s's containerd: sudo k3s ctr -n k8s.io images "
                     "import FILE.tar (gpunode bundle create --pull " +
                     image + " puts one in a bundle's images/)"
               : "sudo k3s ctr -n k8s.io images import " + shell_word(archive) +
                     " (the bundle's archive of " + image + ")";
  }
};

}  // namespace

std::unique_ptr<Stage> make_smoke_stage() {
  return std::make_unique<SmokeStage>();
}

}  // namespace gpunode
