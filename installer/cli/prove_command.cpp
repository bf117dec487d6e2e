#include "cli/commands.hpp"

namespace gpunode {

void register_prove(CLI::App& app, CommandIo& io) {
  auto flags = std::make_shared<FlagValues>();
  CLI::App* cmd = app.add_subcommand(
      "prove",
      "Prove every GPU of every GPU node: CUDA Pods through the whole chain "
      "(runtimeClassName nvidia, one slot each, placed on each node) until "
      "each GPU has passed, at most as many at once as a node has free "
      "slots; names any GPU that failed or was never reached. Where this "
      "host has DCGM, its diagnostic too. Changes nothing else; every Pod "
      "is deleted, on Ctrl-C too. Exits 0 when every GPU passed.");
  add_flags(cmd, *flags, FlagSet::kProve);
  cmd->callback([flags, cmd, &io]() {
    io.exit_code = run_stage_command(RunMode::kProve, *flags, *cmd, io);
  });
}

}  // namespace gpunode
