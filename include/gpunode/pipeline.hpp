// THE ordered list of stages lives in installer/pipeline.cpp; --only and
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

// Keeps the order of the pipeline; an unknown name is a usage error that
// lists the known ones.
Result<StageList> select_stages(StageList all,
                                const std::vector<std::string>& only,
                                const std::vector<std::string>& skip);

}  // namespace gpunode
