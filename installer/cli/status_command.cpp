#include "cli/commands.hpp"

namespace gpunode {

void register_status(CLI::App& app, CommandIo& io) {
  auto flags = std::make_shared<FlagValues>();
  CLI::App* cmd = app.add_subcommand(
      "status",
      "Check every layer of the GPU stack, read-only, with the last run's "
      "history. "
      "Exits 0 when every layer is in place, 1 when one is not.");
  add_flags(cmd, *flags, FlagSet::kStatus);
  cmd->callback([flags, cmd, &io]() {
    io.exit_code = run_stage_command(RunMode::kStatus, *flags, *cmd, io);
  });
}

}  // namespace gpunode
