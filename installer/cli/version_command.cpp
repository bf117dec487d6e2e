#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "exposure/gpu_exposure.hpp"
#include "gpunode/crash_point.hpp"
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
      // Each stage's part and whether it is opt-in: the one list the docs,
      // the JSON events document and the Ansible role are checked against
      // (test/e2e/stage_list_test.cpp).
      nlohmann::json parts = nlohmann::json::array();
      for (const auto& stage : make_pipeline()) {
        // The scopes whose run has the stage: a cluster stage is also in
        // the node part's, which reads what the cluster part made.
        nlohmann::json scopes = nlohmann::json::array();
        for (Scope scope : {Scope::kNode, Scope::kCluster, Scope::kBoth})
          if (stage->runs_in(scope)) scopes.push_back(scope_name(scope));
        parts.push_back({{"name", std::string(stage->name())},
                         {"part", stage_part_name(stage->part())},
                         {"opt_in", stage->opt_in()},
                         {"scopes", scopes}});
      }
      // --variant's choices, the GPU exposure strategies this binary has.
      nlohmann::json variants = nlohmann::json::array();
      for (const ExposureKind& kind : exposure_kinds())
        variants.push_back(kind.name);
      nlohmann::json j{{"version", GPUNODE_VERSION},
                       {"stages", stages},
                       {"stage_parts", parts},
                       {"variants", variants}};
      if (crash_points_compiled_in()) j["test_build"] = true;
      io.out << j.dump() << '\n';
    } else {
      io.out << "gpunode " << GPUNODE_VERSION << "\nstages:";
      for (const auto& s : stages) io.out << ' ' << s;
      io.out << '\n';
      // Only the tests' build says this; a shipped binary never does.
      if (crash_points_compiled_in())
        io.out
            << "test build: crash points compiled in (GPUNODE_TEST_CRASH_AT)\n";
    }
    io.exit_code = 0;
  });
}

}  // namespace gpunode
