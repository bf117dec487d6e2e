#include "cli/commands.hpp"

namespace gpunode {

void register_plan(CLI::App& app, CommandIo& io) {
  auto flags = std::make_shared<FlagValues>();
  CLI::App* cmd = app.add_subcommand("plan",
                                     "Show what 'install' would change on this "
                                     "node, and why. Changes nothing.");
  add_flags(cmd, *flags, FlagSet::kPlan);
  cmd->callback([flags, cmd, &io]() {
    io.exit_code = run_stage_command(RunMode::kPlan, *flags, *cmd, io);
  });
}

}  // namespace gpunode
