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

// kProve: install of the proof alone (`gpunode prove`), against the
// device plugin settings the cluster runs.
enum class RunMode { kInstall, kPlan, kStatus, kProve };
// Whether a run of `mode` changes anything (install and prove, not dry).
inline bool run_mode_changes(RunMode mode, bool dry_run) {
  return (mode == RunMode::kInstall || mode == RunMode::kProve) && !dry_run;
}

// The command's name in the result event: install, install --dry-run,
// plan, status.
std::string command_name(RunMode mode, bool dry_run);

// `progress` becomes the run's Context::progress.
// `known`: facts given instead of found (a connection to reuse).
ExitCode run_stages(Host& host, const Options& opts, RunMode mode,
                    StageList stages, Reporter& report,
                    Progress& progress = no_progress(), KnownFacts known = {});

}  // namespace gpunode
