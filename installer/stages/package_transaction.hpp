// One package manager transaction (dpkg -i, rpm -U) as the toolkit stage
// runs it: after waiting, as apt does, for another package manager's lock
// (unattended-upgrades on a fresh Ubuntu node), and never cut once started:
// an interrupt or the --timeout is told and waited through (FACTS.md,
// "Package transactions").
#pragma once

#include <string>
#include <vector>

#include "gpunode/context.hpp"
#include "host/package_manager.hpp"

namespace gpunode {

// The transaction's run, as it ended (ProcessResult::outlasted_* say what
// it was waited through). Errors: the lock stayed held to the deadline
// (kTimeout, naming the holder), or gpunode was interrupted while it waited
// for the lock (kInterrupted; nothing was started).
Result<ProcessResult> run_package_transaction(
    Context& ctx, const PackageManager& pm,
    const std::vector<std::string>& argv);

}  // namespace gpunode
