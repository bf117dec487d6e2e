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
  // Whether a run of `scope` has this stage (Options::scope): the layers of
  // this host belong to the node part, the cluster's objects to both parts
  // (read-only in the node part), the smoke Pod to a run of both.
  virtual bool runs_in(Scope scope) const { return has_node_part(scope); }
};

using StageList = std::vector<std::unique_ptr<Stage>>;

}  // namespace gpunode
