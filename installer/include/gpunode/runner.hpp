// Runs a list of stages: install (check, apply what is needed, journal),
// plan / --dry-run (check and say what would change) and status (check every
// layer, read-only, with history).
#pragma once

#include <string>

#include "gpunode/host.hpp"
#include "gpunode/options.hpp"
#include "gpunode/progress.hpp"
#include "gpunode/report.hpp"
#include "gpunode/stage.hpp"

namespace gpunode {

enum class RunMode { kInstall, kPlan, kStatus };

// The command's name in the result event: install, install --dry-run,
// plan, status.
std::string command_name(RunMode mode, bool dry_run);

// `progress` becomes the run's Context::progress.
ExitCode run_stages(Host& host, const Options& opts, RunMode mode,
                    StageList stages, Reporter& report,
                    Progress& progress = no_progress());

}  // namespace gpunode
