// allocatable: each GPU node advertises its GPUs x replicas of the
// resource, from plugin pods that run the current config. The node part
// waits for this node; a run with the cluster part for every GPU node (this
// one, if it is one, and each node labelled nvidia.com/gpu.present=true with
// its nvidia.com/gpu.count). Waits with a watch on the Nodes (no sleep
// loop). A node whose trouble is its own layer (driver, toolkit, handler,
// image: only its node part fixes it) is reported, not waited on; when time
// runs out, each short node is named with the lowest broken layer the
// cluster shows (stages/allocatable_diagnosis.hpp).
#include <algorithm>
#include <map>
#include <set>

#include "gpunode/text.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "plugin/gpu_nodes.hpp"
#include "plugin/slot_expectation.hpp"
#include "run/cluster_facts.hpp"
#include "stages/allocatable_diagnosis.hpp"
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

// What the run expects, and of which nodes it cannot say (a node that
// serves GPUs or is labelled present, but carries no count).
struct Expectations {
  std::vector<Expectation> nodes;
  std::vector<std::string> uncounted;
};

std::string wanted_text(const Expectation& want) {
  return want.plan->resource + ": " + std::to_string(want.count()) + " (" +
         std::to_string(want.gpus) + " GPU x " +
         std::to_string(want.plan->replicas) + ")";
}

class AllocatableStage : public Stage {
 public:
  std::string_view name() const override { return "allocatable"; }
  std::string_view layer() const override { return "node allocatable"; }
  // The node part waits for this node; the cluster part for every GPU node.
  // (Context::expected_slots knows which nodes a run covers.)
  StagePart part() const override { return StagePart::kCluster; }

  std::string inputs(Context& ctx) const override {
    return sharing_inputs(ctx.opts.sharing) + "\nnode=" + ctx.opts.node + "\n";
  }

  Check check(Context& ctx) override {
    auto want = expectations(ctx);
    if (!want) return as_blocked(ctx, want.error());
    auto kube = ctx.cluster();
    if (!kube) return as_blocked(ctx, kube.error());
    Findings found;
    json facts = json::array();
    const bool many = want->nodes.size() > 1;
    ClusterPass pass(ctx, **kube, many, ctx.deadline);
    // Many nodes: one list of the Nodes, as of the plugin's pods (pass).
    std::map<std::string, json> listed;
    if (many) {
      auto nodes = (*kube)->list("/api/v1/nodes", ctx.deadline);
      if (!nodes) return as_blocked(ctx, nodes.error());
      for (auto& n : (*nodes)["items"]) {
        const std::string name = n["metadata"].value("name", "");
        listed[name] = std::move(n);
      }
    }
    for (const Expectation& e : want->nodes) {
      std::optional<json> node;
      if (many) {
        if (auto it = listed.find(e.node); it != listed.end())
          node = it->second;
      } else {
        auto got = (*kube)->get("/api/v1/nodes/" + e.node, ctx.deadline);
        if (!got) return as_blocked(ctx, got.error());
        node = std::move(*got);
      }
      if (!node) {
        const Error err =
            node_not_in_cluster(ctx, **kube, e.node, ctx.deadline);
        return blocked("allocatable.no-node", err.message, err.fix, err.exit);
      }
      auto current = pods_current(pass, e);
      if (!current) return as_blocked(ctx, current.error());
      const auto have = advertised(*node, e.plan->resource);
      const bool done = have && *have == e.count() && *current;
      json f{{"node", e.node},
             {"this_node", e.this_node},
             {"gpus", e.gpus},
             {"resource", e.plan->resource},
             {"expected", e.count()},
             {"advertised", have ? json(*have) : json(nullptr)},
             {"pods_current", *current},
             {"ok", done}};
      if (done) {
        found.ok.push_back("node " + e.node + " advertises " + wanted_text(e));
      } else {
        found.short_of.push_back("node " + e.node + " advertises " +
                                 e.plan->resource + ": " +
                                 (have ? std::to_string(*have) : "none") +
                                 ", not yet " + std::to_string(e.count()));
        // Say now what stands in the way; `status` shows it, `install` waits.
        if (auto why = diagnose_node(pass, e, *node)) {
          f["cause"] = {{"layer", why->layer},
                        {"message", why->message},
                        {"fix", why->fix}};
          found.causes.push_back((many ? e.node + ": " : std::string()) + "[" +
                                 why->layer + "] " + why->message +
                                 "; fix: " + why->fix);
          if (found.first_cause.empty())
            found.first_cause = why->layer + ": " + why->message;
        }
      }
      facts.push_back(std::move(f));
    }
    Check c = summarize(*want, found);
    c.facts["nodes"] = facts;
    for (const std::string& n : want->uncounted) {
      c.warnings.push_back(
          "node " + n +
          " serves or is labelled for GPUs but has no nvidia.com/gpu.count "
          "label, so its slots cannot be checked: run gpunode install on it "
          "(its node part labels it)");
    }
    return c;
  }

  Result<void> apply(Context& ctx, const Check&) override {
    // The wait starts from the cluster as it is now.
    ctx.refresh_expected_slots();
    auto want = expectations(ctx);
    if (!want) return want.error();
    auto kube = ctx.cluster();
    if (!kube) return kube.error();
    // The node part watches its own Node (the Node authorizer lets it only
    // with that field selector); the cluster part every Node.
    const bool one = want->nodes.size() == 1;
    std::map<std::string, json> last;
    std::map<std::string, bool> done;
    std::map<std::string, Diagnosis> stuck;  // other nodes' own layers
    auto finished = [&]() {
      for (const Expectation& e : want->nodes)
        if (!done[e.node] && !stuck.count(e.node)) return false;
      return true;
    };
    auto reached = [&](const Expectation& e) {
      const auto it = last.find(e.node);
      if (it == last.end()) return false;
      const auto have = advertised(it->second, e.plan->resource);
      return have && *have == e.count();
    };
    // A pass's watch ends early once every node shows its count, to confirm
    // their pods at once; not again right after a confirmation fell short
    // (an old pod that shows the same count), or it would spin.
    bool confirmation_fell_short = false;
    while (!finished()) {
      const auto now = ctx.host.clock().steady_now();
      if (now >= ctx.deadline) break;
      const auto until = std::min(ctx.deadline, now + kRelist);
      std::set<std::string> unreached;  // what the watch waits for
      for (const Expectation& e : want->nodes)
        if (!done[e.node] && !stuck.count(e.node) && !reached(e))
          unreached.insert(e.node);
      auto watched = (*kube)->watch(
          "/api/v1/nodes", one ? "metadata.name=" + want->nodes[0].node : "",
          [&](const std::string& type, const json& node) {
            if (type == "DELETED") return kube::WatchStep::kContinue;
            const std::string name = node["metadata"].value("name", "");
            const Expectation* e = find(*want, name);
            if (e == nullptr) return kube::WatchStep::kContinue;
            last[name] = node;
            if (reached(*e)) {
              unreached.erase(name);
            } else {
              done[name] = false;
              if (!stuck.count(name)) unreached.insert(name);
            }
            return unreached.empty() && !confirmation_fell_short
                       ? kube::WatchStep::kDone
                       : kube::WatchStep::kContinue;
          },
          until);
      if (!watched && watched.error().exit != ExitCode::kTimeout)
        return watched.error();
      // One pass of reads: the pods of the nodes that show their count
      // (only a current pod's count counts), and why another node is short.
      // Another node held up by its own layer is its node part's to fix:
      // the cluster part reports it instead of waiting the --timeout out.
      // A node only on its way (a current pod running, not registered yet)
      // costs nothing of its own, so the steady wait's requests do not grow
      // with the nodes (the real tier's scale benchmark, issue 25).
      ClusterPass pass(
          ctx, **kube, !one,
          std::min(ctx.deadline, ctx.host.clock().steady_now() + kRelist));
      confirmation_fell_short = false;
      for (const Expectation& e : want->nodes) {
        if (done[e.node] || !reached(e)) continue;
        auto current = pods_current(pass, e);
        if (!current) {
          if (current.error().exit == ExitCode::kTimeout) break;
          return current.error();
        }
        done[e.node] = *current;
        if (*current)
          stuck.erase(e.node);
        else
          confirmation_fell_short = true;
      }
      for (const Expectation& e : want->nodes) {
        if (e.this_node || done[e.node] || !last.count(e.node)) continue;
        auto on_its_way = progressing(pass, e);
        if (!on_its_way) break;  // the next pass looks again
        if (*on_its_way) {
          stuck.erase(e.node);
          continue;
        }
        auto why = diagnose_node(pass, e, last[e.node]);
        if (why && why->node_part())
          stuck[e.node] = *why;
        else
          stuck.erase(e.node);
      }
    }
    std::vector<std::string> lines;
    bool timed_out = false;
    for (const Expectation& e : want->nodes) {
      if (done[e.node]) continue;
      if (auto s = stuck.find(e.node); s != stuck.end()) {
        lines.push_back("node " + e.node + ": [" + s->second.layer + "] " +
                        s->second.message + "; fix: " + s->second.fix);
        continue;
      }
      timed_out = true;
    }
    if (!timed_out && lines.empty()) return {};
    if (!timed_out) {
      return Error{ExitCode::kBlocked, "allocatable",
                   "GPU node(s) short of their slots, waiting on their own "
                   "node part: " +
                       join(lines, " | "),
                   "run gpunode install on each node named (its node part), "
                   "then rerun this"};
    }
    // The run's deadline has passed; looking at the cluster to say why gets
    // a deadline of its own.
    ClusterPass pass(ctx, **kube, !one,
                     ctx.host.clock().steady_now() + kDiagnosisTime);
    if (one) return timeout_error(pass, want->nodes[0], last);
    for (const Expectation& e : want->nodes) {
      if (done[e.node] || stuck.count(e.node)) continue;
      Error one_node = timeout_error(pass, e, last);
      lines.push_back(one_node.message + "; fix: " + one_node.fix);
    }
    return Error{ExitCode::kTimeout, "allocatable",
                 "not every GPU node advertises its slots before the "
                 "deadline: " +
                     join(lines, " | "),
                 "fix each node's layer named above; gpunode status "
                 "--scope cluster shows every node"};
  }

 private:
  // What check() found, node by node.
  struct Findings {
    std::vector<std::string> ok;        // "node a advertises ..."
    std::vector<std::string> short_of;  // "node b advertises ..., not yet N"
    std::vector<std::string> causes;    // "[layer] what; fix: how"
    std::string first_cause;            // "layer: what"
  };

  static const Expectation* find(const Expectations& want,
                                 const std::string& name) {
    for (const Expectation& e : want.nodes)
      if (e.node == name) return &e;
    return nullptr;
  }

  static Check summarize(const Expectations& want, const Findings& found) {
    if (want.nodes.empty()) {
      Check c = satisfied(
          "allocatable.no-gpu-nodes",
          "no GPU node yet: none is labelled nvidia.com/gpu.present=true");
      c.warnings.push_back(
          "run gpunode install on each GPU node (its node part labels it); "
          "the DaemonSet then starts the plugin there");
      return c;
    }
    const bool many = want.nodes.size() > 1;
    if (found.short_of.empty()) {
      Check c = satisfied(
          "allocatable.ok",
          many ? "every GPU node advertises its slots: " + join(found.ok, "; ")
               : found.ok.front());
      add_platform_settings(c, want.nodes.front().plan->resource);
      return c;
    }
    const Expectation& first = want.nodes.front();
    Check c = needed("allocatable.waiting",
                     many ? std::to_string(found.short_of.size()) + " of " +
                                std::to_string(want.nodes.size()) +
                                " GPU node(s) short of their slots: " +
                                join(found.short_of, "; ")
                          : found.short_of.front(),
                     many ? "wait until every GPU node advertises its slots"
                          : "wait until node " + first.node + " advertises " +
                                wanted_text(first));
    c.details = found.causes;
    c.cause = found.first_cause;
    return c;
  }

  static Check as_blocked(Context& ctx, const Error& e) {
    return cluster_blocked(ctx, e, "allocatable.blocked");
  }

  static std::optional<Diagnosis> diagnose_node(ClusterPass& pass,
                                                const Expectation& e,
                                                const json& node) {
    auto why = diagnose(pass, e, node);
    // Another node's own layer is fixed there.
    if (why && !e.this_node && why->node_part())
      why->fix = "on node " + e.node + ": " + why->fix;
    return why;
  }

  static Error timeout_error(ClusterPass& pass, const Expectation& want,
                             const std::map<std::string, json>& last) {
    const auto it = last.find(want.node);
    const json last_node = it == last.end() ? json() : it->second;
    auto why = diagnose_node(pass, want, last_node);
    const auto have = last_node.is_null()
                          ? std::nullopt
                          : advertised(last_node, want.plan->resource);
    return Error{
        ExitCode::kTimeout, "allocatable",
        "node " + want.node + " did not advertise " + want.plan->resource +
            ": " + std::to_string(want.count()) +
            " before the deadline (it advertises " +
            (have ? std::to_string(*have) : std::string("none")) + ")" +
            (why ? "; lowest broken layer: [" + why->layer + "] " + why->message
                 : ""),
        why ? why->fix
            : "kubectl -n kube-system describe pods -l "
              "name=nvidia-device-plugin-ds"};
  }

  static Result<Expectations> expectations(Context& ctx) {
    auto slots = ctx.expected_slots(/*need_this_host=*/true);
    if (!slots) return slots.error();
    const SlotExpectation& want = **slots;
    if (want.name_unknown) return *want.name_unknown;
    if (want.gpus_unknown) {
      return Error{
          ExitCode::kBlocked, "allocatable",
          "cannot tell how many GPUs to expect: " + want.gpus_unknown->message,
          want.gpus_unknown->fix};
    }
    Expectations out;
    if (want.self)
      out.nodes.push_back(
          Expectation{want.self->node, want.plan, *want.self->gpus, true});
    for (const NodeExpectation& n : want.listed) {
      if (want.self && n.node == want.self->node) continue;
      if (!n.labelled) {
        if (n.serving) out.uncounted.push_back(n.node);
        continue;
      }
      if (!n.gpus) {
        out.uncounted.push_back(n.node);
        continue;
      }
      out.nodes.push_back(Expectation{n.node, want.plan, *n.gpus, false});
    }
    return out;
  }

  // The plugin reads its config once, at start: only a pod made from the
  // current template (same config digest) advertises the current config.
  static bool is_current(const json& pod, const DevicePluginPlan& plan) {
    const auto annotations =
        pod["metadata"].value("annotations", json::object());
    return annotations.value(kConfigHashAnnotation, "") == plan.config_hash &&
           pod["status"].value("phase", "") == "Running" &&
           !pod["metadata"].contains("deletionTimestamp");
  }

  static Result<bool> pods_current(ClusterPass& pass, const Expectation& want) {
    auto pods = pass.pods_on(want.node);
    if (!pods) return pods.error();
    for (const auto& pod : *pods)
      if (is_current(pod, *want.plan)) return true;
    return false;
  }

  // Whether the node's plugin pod is current and none of its containers
  // waits (no pull, crash or config trouble): only on its way.
  static Result<bool> progressing(ClusterPass& pass, const Expectation& want) {
    auto pods = pass.pods_on(want.node);
    if (!pods) return pods.error();
    for (const auto& pod : *pods) {
      if (!is_current(pod, *want.plan)) continue;
      bool waiting = false;
      for (const auto& c :
           pod["status"].value("containerStatuses", json::array()))
        waiting =
            waiting || c.value("state", json::object()).contains("waiting");
      if (!waiting) return true;
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<Stage> make_allocatable_stage() {
  return std::make_unique<AllocatableStage>();
}

}  // namespace gpunode
