// THE ordered list of stages lives in installer/stages/stages.hpp; --only and
// --skip are resolved against it here.
#pragma once

#include <string>
#include <vector>

#include "gpunode/result.hpp"
#include "gpunode/stage.hpp"

namespace gpunode {

// Every stage this build has, bottom layer first.
StageList make_pipeline();
std::vector<std::string> pipeline_stage_names();

// The opt-in stages (Stage::opt_in) this run leaves out: all of them for a
// read-only command (status), else those neither named in --only nor
// asked_for() by the options.
std::vector<std::string> unasked_opt_in_stages(const StageList& all,
                                               const Options& opts,
                                               bool read_only);

// Keeps the order of the pipeline; an unknown name is a usage error that
// lists the known ones.
Result<StageList> select_stages(StageList all,
                                const std::vector<std::string>& only,
                                const std::vector<std::string>& skip);

}  // namespace gpunode
