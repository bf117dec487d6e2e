// The edge: the one place exceptions stop and become an exit code.
#include <exception>
#include <iostream>

#include "cli/cli.hpp"
#include "gpunode/result.hpp"
#include "gpunode/terminal_text.hpp"

int main(int argc, char** argv) {
  try {
    return gpunode::run_cli(argc, argv, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "[ERROR gpunode] internal error: "
              << gpunode::terminal_safe(e.what())
              << "\n  fix: please report this with the command you ran\n";
    return static_cast<int>(gpunode::ExitCode::kCannotRun);
  }
}
