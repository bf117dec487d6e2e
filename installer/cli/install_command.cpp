#include "cli/commands.hpp"

namespace gpunode {

void register_install(CLI::App& app, CommandIo& io) {
  auto flags = std::make_shared<FlagValues>();
  CLI::App* cmd =
      app.add_subcommand("install",
                         "Bring this GPU node to the point where Pods can use "
                         "its GPUs: check each layer "
                         "bottom-up and change only what is missing. Safe to "
                         "rerun after any failure.");
  add_flags(cmd, *flags, FlagSet::kInstall);
  cmd->callback([flags, cmd, &io]() {
    io.exit_code = run_stage_command(RunMode::kInstall, *flags, *cmd, io);
  });
}

}  // namespace gpunode
