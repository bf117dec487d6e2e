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
