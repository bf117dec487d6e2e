#include "gpunode/report.hpp"

#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "gpunode/terminal_text.hpp"

namespace gpunode {
namespace {

using json = nlohmann::json;

// Messages quote what tools and files held (nvidia-smi's output, a config
// line), which need not be UTF-8: such bytes become U+FFFD instead of a
// json::type_error that ended the run as an "internal error".
constexpr auto kBadUtf8 = json::error_handler_t::replace;

constexpr std::string_view kGreen = "\033[32m";
constexpr std::string_view kYellow = "\033[33m";
constexpr std::string_view kRed = "\033[1;31m";
constexpr std::string_view kDim = "\033[2m";
constexpr std::string_view kReset = "\033[0m";

const char* exit_status_word(ExitCode code) {
  switch (code) {
    case ExitCode::kOk:
      return "done";
    case ExitCode::kBlocked:
      return "blocked";
    case ExitCode::kUsage:
      return "invalid-input";
    case ExitCode::kTimeout:
      return "timed-out";
    case ExitCode::kIntegrity:
      return "integrity-failure";
    case ExitCode::kCannotRun:
      return "cannot-run";
    case ExitCode::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

json stage_json(const Stage& stage, const Check& c, const char* status) {
  json j{{"event", "stage"},
         {"stage", std::string(stage.name())},
         {"layer", std::string(stage.layer())},
         {"status", status},
         {"code", c.code},
         {"summary", c.summary}};
  if (!c.details.empty()) j["details"] = c.details;
  if (!c.warnings.empty()) j["warnings"] = c.warnings;
  if (!c.fix.empty()) j["fix"] = c.fix;
  if (!c.action.empty()) j["action"] = c.action;
  if (!c.facts.empty()) j["facts"] = c.facts;
  return j;
}

}  // namespace

Reporter::Reporter(std::ostream& out, std::ostream& err, bool json, bool color)
    : out_(out), err_(err), json_(json), color_(color) {}

bool Reporter::want_color(bool flag, int fd) {
  const char* no_color = std::getenv("NO_COLOR");
  if (!flag || (no_color != nullptr && *no_color != '\0')) return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::string_view(term) == "dumb") return false;
  return ::isatty(fd) == 1;
}

std::string Reporter::paint(std::string_view color,
                            std::string_view text) const {
  if (!color_) return std::string(text);
  return std::string(color) + std::string(text) + std::string(kReset);
}

void Reporter::emit_json(const std::string& line) {
  if (json_) out_ << line << '\n' << std::flush;
}

void Reporter::stage_line(std::string_view stage, std::string_view word,
                          std::string_view color, const std::string& text) {
  std::string tag = "[" + std::string(stage) + "]";
  if (tag.size() < 15) tag.resize(15, ' ');
  std::string w(word);
  if (w.size() < 10) w.resize(10, ' ');
  err_ << terminal_safe(tag) << paint(color, w) << terminal_safe(text) << '\n';
}

void Reporter::check(const Stage& stage, const Check& c) {
  emit_json(stage_json(stage, c, check_status_name(c.status))
                .dump(-1, ' ', false, kBadUtf8));
  if (c.status == CheckStatus::kBlocked) {
    err_ << paint(kRed, "[ERROR " + std::string(stage.name()) + "]") << ' '
         << terminal_safe(c.summary) << '\n';
    for (const auto& d : c.details) err_ << "    " << terminal_safe(d) << '\n';
    for (const auto& w : c.warnings)
      err_ << "    " << paint(kYellow, "warning: ") << terminal_safe(w) << '\n';
    if (!c.fix.empty())
      err_ << "  " << paint(kYellow, "fix: ") << terminal_safe(c.fix) << '\n';
    return;
  }
  stage_line(stage.name(),
             c.status == CheckStatus::kSatisfied ? "ok" : "needed",
             c.status == CheckStatus::kSatisfied ? kGreen : kYellow, c.summary);
  if (details_) {
    for (const auto& d : c.details)
      err_ << paint(kDim, "               - " + terminal_safe(d)) << '\n';
  }
  for (const auto& w : c.warnings) {
    err_ << "               " << paint(kYellow, "warning: ") << terminal_safe(w)
         << '\n';
  }
}

void Reporter::applying(const Stage& stage, const std::string& action) {
  emit_json(json{
      {"event", "apply"},
      {"stage", std::string(stage.name())},
      {"action",
       action}}.dump(-1, ' ', false, kBadUtf8));
  stage_line(stage.name(), "applying", kYellow, action);
}

void Reporter::applied(const Stage& stage, const Check& after) {
  emit_json(stage_json(stage, after, "applied").dump(-1, ' ', false, kBadUtf8));
  stage_line(stage.name(), "applied", kGreen, after.summary);
}

void Reporter::would_apply(const Stage& stage, const Check& c) {
  emit_json(stage_json(stage, c, "would-apply").dump(-1, ' ', false, kBadUtf8));
  stage_line(stage.name(), "would", kYellow,
             c.action + "  (" + c.summary + ")");
  if (details_) {
    for (const auto& d : c.details)
      err_ << paint(kDim, "               - " + terminal_safe(d)) << '\n';
  }
  for (const auto& w : c.warnings) {
    err_ << "               " << paint(kYellow, "warning: ") << terminal_safe(w)
         << '\n';
  }
}

void Reporter::skipped(std::string_view stage, const std::string& why) {
  emit_json(json{
      {"event", "stage"},
      {"stage", std::string(stage)},
      {"status", "skipped"},
      {"summary",
       why}}.dump(-1, ' ', false, kBadUtf8));
  stage_line(stage, "skipped", kDim, why);
}

void Reporter::history(std::string_view stage, const std::string& text) {
  emit_json(
      json{{"event", "history"}, {"stage", std::string(stage)}, {"text", text}}
          .dump(-1, ' ', false, kBadUtf8));
  err_ << paint(kDim, "               last run: " + terminal_safe(text))
       << '\n';
}

void Reporter::warning(std::string_view layer, const std::string& text) {
  emit_json(json{
      {"event", "warning"}, {"layer", std::string(layer)}, {"message", text}}
                .dump(-1, ' ', false, kBadUtf8));
  err_ << paint(kYellow, "[WARN " + terminal_safe(layer) + "]") << ' '
       << terminal_safe(text) << '\n';
}

void Reporter::info(std::string_view layer, const std::string& text) {
  emit_json(
      json{{"event", "info"}, {"layer", std::string(layer)}, {"message", text}}
          .dump(-1, ' ', false, kBadUtf8));
  stage_line(layer, "", kDim, text);
}

json Reporter::error_event(const Error& e) {
  json event = {{"event", "error"},
                {"layer", e.layer},
                {"message", e.message},
                {"fix", e.fix},
                {"exit_code", static_cast<int>(e.exit)}};
  if (!e.problems.empty()) event["problems"] = e.problems;
  return event;
}

void Reporter::error(const Error& e) {
  emit_json(error_event(e).dump(-1, ' ', false, kBadUtf8));
  err_ << paint(kRed, "[ERROR " + terminal_safe(e.layer) + "]") << ' ';
  if (e.problems.empty()) {
    err_ << terminal_safe(e.message) << '\n';
  } else {
    // One problem a line, each escaped on its own: a newline inside one
    // (a file name) still cannot start a line of its own.
    for (std::size_t i = 0; i < e.problems.size(); ++i)
      err_ << (i == 0 ? "" : "  ") << terminal_safe(e.problems[i]) << '\n';
  }
  if (!e.fix.empty())
    err_ << "  " << paint(kYellow, "fix: ") << terminal_safe(e.fix) << '\n';
}

json Reporter::result_event(std::string_view command, ExitCode code,
                            const std::string& summary,
                            const std::vector<StageOutcome>& outcomes) {
  json stages = json::array();
  for (const auto& o : outcomes)
    stages.push_back(json{{"stage", o.stage}, {"status", o.status}});
  return json{{"event", "result"},
              {"schema", kJsonSchemaVersion},
              {"command", std::string(command)},
              {"exit_code", static_cast<int>(code)},
              {"status", exit_status_word(code)},
              {"summary", summary},
              {"stages", stages}};
}

void Reporter::refused(std::string_view command, const Error& e,
                       ExitCode code) {
  error(e);
  emit_json(result_event(command, code, e.message, {})
                .dump(-1, ' ', false, kBadUtf8));
}

void Reporter::result(std::string_view command, ExitCode code,
                      const std::string& summary,
                      const std::vector<StageOutcome>& outcomes,
                      const json& extra) {
  json event = result_event(command, code, summary, outcomes);
  for (const auto& [key, value] : extra.items()) event[key] = value;
  emit_json(event.dump(-1, ' ', false, kBadUtf8));
  err_ << paint(code == ExitCode::kOk ? kGreen : kRed,
                std::string(command) + ": " + exit_status_word(code))
       << (summary.empty() ? "" : " - " + terminal_safe(summary)) << '\n';
}

}  // namespace gpunode
