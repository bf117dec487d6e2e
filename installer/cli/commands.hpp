// One registration function per subcommand (one file each). Each sets a
// callback that stores its exit code in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/flags.hpp"
#include "gpunode/runner.hpp"

namespace gpunode {

struct CommandIo {
  std::ostream& out;
  std::ostream& err;
  int exit_code = 0;
};

void register_install(CLI::App& app, CommandIo& io);
void register_plan(CLI::App& app, CommandIo& io);
void register_status(CLI::App& app, CommandIo& io);
void register_uninstall(CLI::App& app, CommandIo& io);
void register_version(CLI::App& app, CommandIo& io);
// bundle verify | keygen | create
void register_bundle(CLI::App& app, CommandIo& io);

// Shared by install, plan and status: validate, build the real host, run the
// selected stages.
int run_stage_command(RunMode mode, const FlagValues& flags, CommandIo& io);

}  // namespace gpunode
