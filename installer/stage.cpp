#include "gpunode/stage.hpp"

namespace gpunode {

const char* check_status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::kSatisfied:
      return "satisfied";
    case CheckStatus::kNeeded:
      return "needed";
    case CheckStatus::kBlocked:
      return "blocked";
  }
  return "unknown";
}

const char* stage_part_name(StagePart p) {
  switch (p) {
    case StagePart::kNode:
      return "node";
    case StagePart::kCluster:
      return "cluster";
    case StagePart::kClusterAction:
      return "cluster-action";
  }
  return "node";
}

bool Stage::runs_in(Scope scope) const {
  switch (part()) {
    case StagePart::kNode:
      return has_node_part(scope);
    case StagePart::kCluster:
      return true;  // the node part reads what the cluster part made
    case StagePart::kClusterAction:
      return has_cluster_part(scope);
  }
  return false;
}

Check ClusterObjectStage::check(Context& ctx) {
  return ctx.carries_cluster_part() ? check_cluster_part(ctx)
                                    : check_from_node(ctx);
}

Result<void> ClusterObjectStage::apply(Context& ctx, const Check& needed) {
  return ctx.carries_cluster_part() ? apply_cluster_part(ctx, needed)
                                    : wait_from_node(ctx, needed);
}

Check satisfied(std::string code, std::string summary) {
  Check c;
  c.status = CheckStatus::kSatisfied;
  c.code = std::move(code);
  c.summary = std::move(summary);
  c.exit = ExitCode::kOk;
  return c;
}

Check needed(std::string code, std::string summary, std::string action) {
  Check c;
  c.status = CheckStatus::kNeeded;
  c.code = std::move(code);
  c.summary = std::move(summary);
  c.action = std::move(action);
  c.exit = ExitCode::kOk;
  return c;
}

Check blocked(std::string code, std::string summary, std::string fix,
              ExitCode exit) {
  Check c;
  c.status = CheckStatus::kBlocked;
  c.code = std::move(code);
  c.summary = std::move(summary);
  c.fix = std::move(fix);
  c.exit = exit;
  return c;
}

}  // namespace gpunode
