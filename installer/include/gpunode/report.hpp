// How gpunode speaks: "[stage] ..." lines and "[ERROR layer] ... / fix: ..."
// for people on stderr (colour only on a TTY, never under NO_COLOR), and one
// JSON object per line on stdout with --json.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "gpunode/result.hpp"
#include "gpunode/stage.hpp"

namespace gpunode {

// The version of --json's schema (docs/json-events.md), in the result event's
// "schema". Adding an event, a field or a value keeps the number; removing or
// renaming one, or changing what one means or its type, raises it: a reader
// (the fleet's Ansible module) checks it before trusting any field.
inline constexpr int kJsonSchemaVersion = 1;

struct StageOutcome {
  std::string stage;
  std::string status;  // satisfied, applied, would-apply, blocked, skipped...
};

class Reporter {
 public:
  Reporter(std::ostream& out, std::ostream& err, bool json, bool color);

  // A stage's check, as found.
  void check(const Stage& stage, const Check& c);
  void applying(const Stage& stage, const std::string& action);
  void applied(const Stage& stage, const Check& after);
  void would_apply(const Stage& stage, const Check& c);
  void skipped(std::string_view stage, const std::string& why);
  void history(std::string_view stage, const std::string& text);
  void warning(std::string_view layer, const std::string& text);
  void info(std::string_view layer, const std::string& text);
  void error(const Error& e);
  // A command refused before it ran (bad flags, a broken config.toml): the
  // error and, with --json, the result event every command ends with, so a
  // reader (the Ansible module) always gets one. People have the error
  // line already; no summary line is added for them.
  void refused(std::string_view command, const Error& e, ExitCode code);
  // `extra`: more fields of the result event (plan's "plan").
  void result(std::string_view command, ExitCode code,
              const std::string& summary,
              const std::vector<StageOutcome>& outcomes,
              const nlohmann::json& extra = nlohmann::json::object());

  // The error event's fields (docs/json-events.md), the one builder.
  static nlohmann::json error_event(const Error& e);
  // The result event's fields (docs/json-events.md), the one builder.
  static nlohmann::json result_event(std::string_view command, ExitCode code,
                                     const std::string& summary,
                                     const std::vector<StageOutcome>& outcomes);

  // Show each check's detail lines (status, plan and -v do).
  void set_details(bool on) { details_ = on; }

  static bool want_color(bool flag, int fd);

 private:
  void stage_line(std::string_view stage, std::string_view word,
                  std::string_view color, const std::string& text);
  void emit_json(const std::string& line);
  std::string paint(std::string_view color, std::string_view text) const;

  std::ostream& out_;
  std::ostream& err_;
  bool json_;
  bool color_;
  bool details_ = false;
};

}  // namespace gpunode
