// labels: this node's Node carries the GPU labels (plugin/gpu_labels.hpp)
// for what the driver layer counts, so the device plugin DaemonSet (node
// affinity on nvidia.com/gpu.present=true) runs here, the cluster part knows
// how many slots to expect, and workloads can select GPU nodes. Written by
// server-side apply of the labels alone, as the node's own identity may:
// the Node authorizer lets a node patch its own Node object, and
// NodeRestriction (plugin/pkg/admission/noderestriction/admission.go
// admitNode) refuses only labels under node-restriction.kubernetes.io/ and
// the restricted kubernetes.io/ and k8s.io ones, not nvidia.com/.
// It comes after the node's own layers: a node is labelled a GPU node only
// once the plugin can run on it.
#include "evidence/evidence_key.hpp"
#include "plan/node_plan.hpp"
#include "plugin/gpu_labels.hpp"
#include "run/cluster_facts.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using kube::json;

class LabelsStage : public Stage {
 public:
  std::string_view name() const override { return "labels"; }
  std::string_view layer() const override { return "node labels"; }
  bool writes_only_cluster_objects(Scope) const override { return true; }

  std::string inputs(Context& ctx) const override {
    return "node=" + ctx.opts.node + "\n";
  }

  Check check(Context& ctx) override {
    auto want = wanted(ctx);
    if (!want) return cluster_blocked(ctx, want.error(), "labels.unknown");
    auto kube = ctx.cluster();
    if (!kube) return cluster_blocked(ctx, kube.error(), "labels.unknown");
    auto live = (*kube)->get("/api/v1/nodes/" + (*want)->node, ctx.deadline);
    if (!live) return cluster_blocked(ctx, live.error(), "labels.unknown");
    if (!*live) {
      const Error e =
          node_not_in_cluster(ctx, **kube, (*want)->node, ctx.deadline);
      return blocked("labels.no-node", e.message, e.fix, e.exit);
    }
    const json have = (**live)["metadata"].value("labels", json::object());
    std::string differ;
    for (const auto& [key, value] : (*want)->labels) {
      if (have.value(key, "") == value) continue;
      differ += (differ.empty() ? "" : ", ") + key + "=" + value +
                (have.contains(key)
                     ? " (now " + have.value(key, std::string("?")) + ")"
                     : "");
    }
    // The GPUs' UUIDs (the proof covers them) and this node's evidence key,
    // published beside the labels.
    // The key as it is now, not as the plan found it: apply makes it.
    auto key = read_evidence_public(ctx.host.fs(), ctx.opts.state_dir);
    if (!key)
      return blocked("labels.evidence-key", key.error().message,
                     key.error().fix, key.error().exit);
    const json notes =
        (**live)["metadata"].value("annotations", json::object());
    bool notes_differ = !*key;
    for (const auto& [name, value] : annotations(**want, *key))
      notes_differ |= notes.value(name, "") != value;
    if (differ.empty() && notes_differ) {
      Check c = needed(
          "labels.apply",
          "node " + (*want)->node +
              (*key ? " does not publish its GPUs' UUIDs and evidence key"
                    : " has no evidence key yet"),
          std::string(*key ? ""
                           : "make this node's evidence key (root-only, in "
                             "the state dir), then ") +
              "annotate node " + (*want)->node + " with " +
              kGpuUuidsAnnotation + " and " + kEvidenceKeyAnnotation);
      c.facts["node"] = (*want)->node;
      c.facts["labels"] = label_facts(**want, have);
      c.facts["objects"]["update"] = {"Node " + (*want)->node};
      return c;
    }
    Check c = differ.empty()
                  ? satisfied("labels.ok", "node " + (*want)->node +
                                               " is labelled as a GPU node (" +
                                               list((*want)->labels) + ")")
                  : needed("labels.apply",
                           "node " + (*want)->node + " lacks GPU labels",
                           "label node " + (*want)->node + ": " + differ);
    c.facts["node"] = (*want)->node;
    c.facts["labels"] = label_facts(**want, have);
    if (!differ.empty())
      c.facts["objects"]["update"] = {"Node " + (*want)->node};
    return c;
  }

  Result<void> apply(Context& ctx, const Check&) override {
    auto want = wanted(ctx);
    if (!want) return want.error();
    auto kube = ctx.cluster();
    if (!kube) return kube.error();
    auto have = read_evidence_public(ctx.host.fs(), ctx.opts.state_dir);
    if (!have) return have.error();
    auto notes = annotations(**want, *have);
    // The key is made at the first install; plan's dry run makes none.
    if (!*have && !ctx.previewing()) {
      auto key = ensure_evidence_key(ctx.host.fs(), ctx.opts.state_dir);
      if (!key) return key.error();
      notes[kEvidenceKeyAnnotation] = *key;
    }
    const json node{{"apiVersion", "v1"},
                    {"kind", "Node"},
                    {"metadata",
                     {{"name", (*want)->node},
                      {"labels", (*want)->labels},
                      {"annotations", notes}}}};
    auto applied =
        (*kube)->apply("/api/v1/nodes/" + (*want)->node, node, ctx.deadline);
    if (!applied) return applied.error();
    return {};
  }

 private:
  // The node plan's labels for this node (plan/node_plan.hpp).
  static Result<const NodePlan*> wanted(Context& ctx) {
    return ctx.node_plan();
  }

  // What the Node is to carry beside its labels.
  static std::map<std::string, std::string> annotations(
      const NodePlan& want, const std::optional<std::string>& key) {
    auto out = want.annotations;
    if (key) out[kEvidenceKeyAnnotation] = *key;
    return out;
  }

  static json label_facts(const NodePlan& want, const json& have) {
    json out = json::array();
    for (const auto& [key, value] : want.labels)
      out.push_back({{"name", key},
                     {"value", value},
                     {"set", have.value(key, "") == value}});
    return out;
  }

  static std::string list(const std::map<std::string, std::string>& labels) {
    std::string out;
    for (const auto& [k, v] : labels)
      out += (out.empty() ? "" : ", ") + k + "=" + v;
    return out;
  }
};

}  // namespace

std::unique_ptr<Stage> make_labels_stage() {
  return std::make_unique<LabelsStage>();
}

}  // namespace gpunode
