// The pipeline: the stages in THE order of stages/stages.hpp, and --only /
// --skip resolved against it.
#include "gpunode/pipeline.hpp"

#include <algorithm>

#include "stages/stages.hpp"

namespace gpunode {

StageList make_pipeline() {
  StageList stages;
#define GPUNODE_ADD_STAGE(name) stages.push_back(make_##name##_stage());
  GPUNODE_STAGES(GPUNODE_ADD_STAGE)
#undef GPUNODE_ADD_STAGE
  return stages;
}

std::vector<std::string> pipeline_stage_names() {
  std::vector<std::string> names;
  for (const auto& s : make_pipeline()) names.emplace_back(s->name());
  return names;
}

std::vector<std::string> unasked_opt_in_stages(const StageList& all,
                                               const Options& opts,
                                               bool read_only) {
  std::vector<std::string> out;
  for (const auto& s : all) {
    if (!s->opt_in()) continue;
    const std::string name(s->name());
    const bool named =
        std::find(opts.only.begin(), opts.only.end(), name) != opts.only.end();
    if (read_only || (!named && !s->asked_for(opts))) out.push_back(name);
  }
  return out;
}

Result<StageList> select_stages(StageList all,
                                const std::vector<std::string>& only,
                                const std::vector<std::string>& skip) {
  std::vector<std::string> known;
  for (const auto& s : all) known.emplace_back(s->name());
  auto check_names = [&](const std::vector<std::string>& names,
                         const char* flag) -> Result<void> {
    for (const auto& n : names) {
      if (std::find(known.begin(), known.end(), n) == known.end()) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        Error e = usage_error(std::string(flag) + ": unknown stage '" + n +
                              "' (stages: " + list + ")");
        e.fix = std::string("name stages from that list in ") + flag +
                " (gpunode version lists them)";
        return e;
      }
    }
    return {};
  };
  if (auto r = check_names(only, "--only"); !r) return r.error();
  if (auto r = check_names(skip, "--skip"); !r) return r.error();

  StageList chosen;
  for (auto& s : all) {
    const std::string name(s->name());
    bool in_only =
        only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    bool skipped = std::find(skip.begin(), skip.end(), name) != skip.end();
    if (in_only && !skipped) chosen.push_back(std::move(s));
  }
  if (chosen.empty()) {
    Error e = usage_error("--only/--skip leave no stage to run");
    e.fix = only.empty() ? "skip fewer stages with --skip"
                         : "drop from --skip the stages --only names";
    return e;
  }
  return chosen;
}

}  // namespace gpunode
