#include "scripted_runner.hpp"

namespace gpunode::test {
namespace {

std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

}  // namespace

void ScriptedRunner::script(const std::string& argv, ProcessResult result) {
  scripted_[argv] = std::move(result);
}

void ScriptedRunner::script(const std::string& argv, const std::string& out,
                            int exit_code) {
  ProcessResult r;
  r.exit_code = exit_code;
  r.out = out;
  script(argv, std::move(r));
}

ProcessResult ScriptedRunner::run(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout) {
  const std::string line = joined(argv);
  calls_.push_back(line);
  argvs_.push_back(argv);
  timeouts_.push_back(timeout);
  if (on_run) on_run();
  const auto it = scripted_.find(line);
  if (it != scripted_.end()) return it->second;
  if (fallback_) return *fallback_;
  unscripted_.push_back(line);
  ProcessResult r;
  r.not_found = true;
  return r;
}

ProcessResult ScriptedRunner::run_with_input(
    const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
    const InputSource& next_chunk) {
  // The input is drained, as a child reading it all would.
  for (;;) {
    auto chunk = next_chunk();
    if (!chunk) {
      ProcessResult r = run(argv, timeout);
      r.input_error = chunk.error();
      return r;
    }
    if (chunk->empty()) break;
  }
  return run(argv, timeout);
}

std::optional<std::string> ScriptedRunner::which(const std::string& program) {
  if (locate) return locate(program);
  if (fallback_ && !fallback_->not_found) return "/usr/bin/" + program;
  for (const auto& [argv, result] : scripted_) {
    if (argv.rfind(program + " ", 0) == 0 || argv == program)
      return "/usr/bin/" + program;
  }
  return std::nullopt;
}

}  // namespace gpunode::test
