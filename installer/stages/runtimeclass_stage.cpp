// runtimeclass: the node.k8s.io/v1 RuntimeClass `nvidia` with handler
// `nvidia`, so a Pod can name the containerd handler k3s renders. k3s >=
// v1.29 creates one itself (manifests/runtimes.yaml): that one is accepted
// as it is. One with another handler is never overwritten silently.
#include "kube/manifests.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "run/cluster_facts.hpp"
#include "run/host_role.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

class RuntimeClassStage : public ClusterObjectStage {
 public:
  std::string_view name() const override { return "runtimeclass"; }
  std::string_view layer() const override { return "RuntimeClass"; }

  std::string inputs(Context& ctx) const override {
    return "kubeconfig=" + ctx.opts.kubeconfig +
           "\nruntimeclass=nvidia handler=nvidia\n";
  }

  // The node part reads it (the Node authorizer's NodeRules let a node get
  // RuntimeClasses); only the cluster part creates it.
 protected:
  Check check_cluster_part(Context& ctx) override {
    auto live = read_live(ctx);
    if (!live) return from_error(ctx, live.error());
    if (!*live) {
      Check c = needed(
          "runtimeclass.missing", "RuntimeClass nvidia does not exist",
          "create RuntimeClass nvidia with handler nvidia (server-side apply)");
      c.facts["objects"]["create"] = {"RuntimeClass nvidia"};
      c.facts["handler"] = nullptr;
      c.facts["managed_by_gpunode"] = false;
      return c;
    }
    return check_live(**live);
  }

  Check check_from_node(Context& ctx) override {
    auto live = read_live(ctx);
    if (!live) return from_error(ctx, live.error());
    if (!*live) {
      return blocked("runtimeclass.cluster-part",
                     "RuntimeClass nvidia does not exist: the cluster part "
                     "has not run yet (this node's identity may read it, "
                     "not create it)",
                     cluster_part_command());
    }
    return check_live(**live);
  }

  // The node part never finds it to create: its check is satisfied or
  // blocked, so the runner never calls this.
  Result<void> wait_from_node(Context& ctx, const Check& needed) override {
    return apply_cluster_part(ctx, needed);
  }

  Result<void> apply_cluster_part(Context& ctx, const Check&) override {
    auto kube = ctx.cluster();
    if (!kube) return kube.error();
    auto texts = ctx.manifests();
    if (!texts) return texts.error();
    auto rc = render_runtimeclass(**texts);
    if (!rc) return rc.error();
    auto applied = (*kube)->apply(runtimeclass_path(), *rc, ctx.deadline);
    if (!applied) return applied.error();
    return {};
  }

 private:
  static Result<std::optional<kube::json>> read_live(Context& ctx) {
    auto kube = ctx.cluster();
    if (!kube) return kube.error();
    return (*kube)->get(runtimeclass_path(), ctx.deadline);
  }

  // The RuntimeClass as found: ours or k3s's with handler nvidia is kept.
  static Check check_live(const kube::json& live) {
    const std::string handler = live.value("handler", "");
    if (handler != "nvidia") {
      return blocked("runtimeclass.other-handler",
                     "RuntimeClass nvidia exists with handler '" + handler +
                         "', not 'nvidia': Pods naming it would not get the "
                         "NVIDIA runtime",
                     "kubectl get runtimeclass nvidia -o yaml to see who made "
                     "it; if nothing "
                     "needs that handler: kubectl delete runtimeclass nvidia, "
                     "then rerun gpunode");
    }
    const auto labels = live["metadata"].value("labels", kube::json::object());
    const bool ours = labels.value(kManagedByLabel, "") == "gpunode";
    Check c = satisfied("runtimeclass.ok",
                        std::string("RuntimeClass nvidia -> handler nvidia") +
                            (ours ? " (created by gpunode)"
                                  : " (not created by gpunode; kept)"));
    c.facts["handler"] = handler;
    c.facts["managed_by_gpunode"] = ours;
    return c;
  }

  static Check from_error(Context& ctx, const Error& e) {
    return cluster_blocked(ctx, e, "runtimeclass.manifest");
  }
};

}  // namespace

std::unique_ptr<Stage> make_runtimeclass_stage() {
  return std::make_unique<RuntimeClassStage>();
}

}  // namespace gpunode
