#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "gpunode/pipeline.hpp"

namespace gpunode {

void register_version(CLI::App& app, CommandIo& io) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("version", "Print gpunode's version and its stages");
  cmd->add_flag("--json", *json, "As one JSON object");
  cmd->callback([json, &io]() {
    const auto stages = pipeline_stage_names();
    if (*json) {
      io.out << nlohmann::json{{"version", GPUNODE_VERSION}, {"stages", stages}}
                    .dump()
             << '\n';
    } else {
      io.out << "gpunode " << GPUNODE_VERSION << "\nstages:";
      for (const auto& s : stages) io.out << ' ' << s;
      io.out << '\n';
    }
    io.exit_code = 0;
  });
}

}  // namespace gpunode
