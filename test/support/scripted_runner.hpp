// A ProcessRunner that runs nothing: each argv the test scripted gets its
// canned result, every call is recorded, and an argv nobody scripted is
// "not found on PATH" (and listed by unscripted()), so a stage that runs
// an unexpected program fails visibly instead of touching this machine.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "gpunode/host.hpp"

namespace gpunode::test {

class ScriptedRunner : public ProcessRunner {
 public:
  // `argv` joined by single spaces, e.g. "k3s ctr -n k8s.io images ls ...".
  void script(const std::string& argv, ProcessResult result);
  // Shorthand: exit code 0 (or `exit_code`) with `out` on stdout.
  void script(const std::string& argv, const std::string& out,
              int exit_code = 0);

  // Each call's argv, joined by spaces, in order.
  const std::vector<std::string>& calls() const { return calls_; }
  const std::vector<std::string>& unscripted() const { return unscripted_; }

  ProcessResult run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override;
  ProcessResult run_with_input(const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout,
                               const InputSource& next_chunk) override;
  std::optional<std::string> which(const std::string& program) override;

 private:
  std::map<std::string, ProcessResult> scripted_;
  std::vector<std::string> calls_;
  std::vector<std::string> unscripted_;
};

}  // namespace gpunode::test
