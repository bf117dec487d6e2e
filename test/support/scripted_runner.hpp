// The one fake ProcessRunner of the tests: it runs nothing. Each argv the
// test scripted gets its canned result; every call is recorded (argv,
// joined line and timeout). An argv nobody scripted gets the fallback
// answer when the test gave one, and is otherwise "not found on PATH" and
// listed by unscripted(), so a stage that runs an unexpected program fails
// visibly instead of touching this machine.
//
// Tests whose assertions read other member names (handler_test's `calls`,
// driver_parse_test's `argv_`) keep thin local adapters over this class,
// never a second fake. The fuzz targets link this file too.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/host.hpp"

namespace gpunode::test {

class ScriptedRunner : public ProcessRunner {
 public:
  ScriptedRunner() = default;
  // Every argv gets `fallback` unless scripted otherwise.
  explicit ScriptedRunner(ProcessResult fallback)
      : fallback_(std::move(fallback)) {}

  // `argv` joined by single spaces, e.g. "k3s ctr -n k8s.io images ls ...".
  void script(const std::string& argv, ProcessResult result);
  // Shorthand: exit code 0 (or `exit_code`) with `out` on stdout.
  void script(const std::string& argv, const std::string& out,
              int exit_code = 0);

  // Each call's argv, joined by spaces, in order.
  const std::vector<std::string>& calls() const { return calls_; }
  // Each call's argv and timeout, in order.
  const std::vector<std::vector<std::string>>& argvs() const { return argvs_; }
  const std::vector<std::chrono::milliseconds>& timeouts() const {
    return timeouts_;
  }
  // The calls that had neither a script nor a fallback.
  const std::vector<std::string>& unscripted() const { return unscripted_; }

  // Called at every run, before the answer is given: a test's moment to
  // change the world the program would have changed.
  std::function<void()> on_run;
  // Where which() finds a program. Unset: /usr/bin/<program> when a script
  // names it or a fallback answers everything (unless the fallback is
  // "not found"), otherwise nowhere.
  std::function<std::optional<std::string>(const std::string&)> locate;

  ProcessResult run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override;
  ProcessResult run_with_input(const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout,
                               const InputSource& next_chunk) override;
  std::optional<std::string> which(const std::string& program) override;

 protected:
  // For the adapters: the fallback answer, to change between runs.
  std::optional<ProcessResult> fallback_;

 private:
  std::map<std::string, ProcessResult> scripted_;
  std::vector<std::string> calls_;
  std::vector<std::vector<std::string>> argvs_;
  std::vector<std::chrono::milliseconds> timeouts_;
  std::vector<std::string> unscripted_;
};

}  // namespace gpunode::test
