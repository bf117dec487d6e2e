// A stage is one layer of the GPU stack: data + a predicate (check) + an
// action (apply), after kubeadm's workflow phases. check() is always the
// authority on what is true now; the journal only records history.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "gpunode/context.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

enum class CheckStatus { kSatisfied, kNeeded, kBlocked };
const char* check_status_name(CheckStatus s);

struct Check {
  CheckStatus status = CheckStatus::kBlocked;
  std::string code;     // stable identifier, e.g. "handler.runtime-missing"
  std::string summary;  // one line: what is true now
  std::string fix;      // for blocked: the command or step that fixes it
  std::string action;   // for needed: what apply() will change
  std::vector<std::string> details;   // further facts worth showing
  std::vector<std::string> warnings;  // not blocking, but worth acting on
  // For needed: "layer: what" when the check looked for what stands in the
  // way and found it (the allocatable stage's diagnosis). status names it
  // in its last line rather than a lower stage's lesser change.
  std::string cause;
  ExitCode exit = ExitCode::kBlocked;  // for blocked: the class of failure
  // What the check found, as fields: --json's "facts" of the stage event
  // (README, "JSON output"). The quantities plan adds up are here:
  // "objects" {"create","update","delete": ["Kind ns/name", ...]},
  // "import_bytes", "disk" {"path","needed_bytes","free_bytes"}.
  nlohmann::json facts = nlohmann::json::object();
};

// The code of a check that could not ask the cluster (the kubeconfig, the
// API server): the runner reports that once as the "cluster" layer, not as
// the failure of each stage that needed it (kube/cluster.hpp).
inline constexpr const char* kClusterConnectionCode = "cluster.unreachable";

Check satisfied(std::string code, std::string summary);
Check needed(std::string code, std::string summary, std::string action);
Check blocked(std::string code, std::string summary, std::string fix,
              ExitCode exit = ExitCode::kBlocked);

// Which part of a run a stage belongs to (README, "Scope"). The run's scope
// decides which parts this host carries out (Context::carries_*_part); a
// stage only says which part it is of, and never asks for the scope.
enum class StagePart {
  kNode,     // this host's layers: run by the node part
  kCluster,  // the cluster's objects and what they make of the GPU nodes:
             // made by the cluster part, read (or waited for) by the node part
  // An action of the cluster part over every GPU node (the proof Pods): a
  // run with the cluster part only, whose admin identity may make Pods.
  kClusterAction
};
const char* stage_part_name(StagePart p);

class Stage {
 public:
  virtual ~Stage() = default;
  virtual std::string_view name() const = 0;
  // The layer in the operator's words, e.g. "NVIDIA driver".
  virtual std::string_view layer() const = 0;
  // A canonical text of everything check()/apply() depend on; its digest is
  // journaled so history can say whether the inputs changed since.
  virtual std::string inputs(Context& ctx) const = 0;
  virtual Check check(Context& ctx) = 0;
  // Called only when check() answered kNeeded and this is not a dry run.
  virtual Result<void> apply(Context& ctx, const Check& needed) = 0;
  // An opt-in stage (an action, not a state: the smoke Pod) runs only when
  // asked for, by --only NAME or asked_for(), and never from status.
  virtual bool opt_in() const { return false; }
  virtual bool asked_for(const Options&) const { return false; }
  // True when apply() changes nothing but API objects, through
  // ctx.cluster(): plan then runs it against a Context whose cluster sends
  // every write with dryRun=All, so the API server validates (admission,
  // schema) what install would write, and nothing is stored.
  virtual bool writes_only_cluster_objects(Scope) const { return false; }
  virtual StagePart part() const { return StagePart::kNode; }
  // Whether a run of `scope` has this stage, by its part().
  bool runs_in(Scope scope) const;
};

// A stage over objects the cluster part makes (the RuntimeClass, the device
// plugin): a run that carries the cluster part checks and applies them; one
// without it (--scope node, the kubelet's identity) only reads what this
// node can see of them, and waits. The choice is made here, once.
class ClusterObjectStage : public Stage {
 public:
  StagePart part() const final { return StagePart::kCluster; }
  Check check(Context& ctx) final;
  Result<void> apply(Context& ctx, const Check& needed) final;
  // The node part's reading writes nothing, so it needs no dry run.
  bool writes_only_cluster_objects(Scope scope) const final {
    return has_cluster_part(scope);
  }

 protected:
  virtual Check check_cluster_part(Context& ctx) = 0;
  virtual Result<void> apply_cluster_part(Context& ctx,
                                          const Check& needed) = 0;
  virtual Check check_from_node(Context& ctx) = 0;
  virtual Result<void> wait_from_node(Context& ctx, const Check& needed) = 0;
};

using StageList = std::vector<std::unique_ptr<Stage>>;

}  // namespace gpunode
