// One registration function per subcommand (one file each). Each sets a
// callback that stores its exit code in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
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
// install of the proof alone (proof/gpu_proof.hpp)
void register_prove(CLI::App& app, CommandIo& io);
// evidence | evidence verify FILE (evidence/evidence_record.hpp)
void register_evidence(CLI::App& app, CommandIo& io);
void register_uninstall(CLI::App& app, CommandIo& io);
void register_version(CLI::App& app, CommandIo& io);
// bundle verify | keygen | create
void register_bundle(CLI::App& app, CommandIo& io);
// config show: each site default's value and where it came from
void register_config(CLI::App& app, CommandIo& io);
// Hidden: `man` and `completion bash`, rendered from `app` itself.
void register_docs(CLI::App& app, CommandIo& io);

// The whole command line; its callbacks write to `io`.
std::unique_ptr<CLI::App> make_app(CommandIo& io);

// Shared by install, plan and status: validate, build the real host, run the
// selected stages.
// Site defaults (config.toml, GPUNODE_*) fill what `cmd`'s flags left unset.
int run_stage_command(RunMode mode, FlagValues flags, const CLI::App& cmd,
                      CommandIo& io);

}  // namespace gpunode
