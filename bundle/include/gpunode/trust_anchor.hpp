// Whether a file may be trusted as an anchor (a publisher key, the
// trusted-keys directory): nobody but root, or the user running gpunode, can
// have written it or replaced it. The same rule sshd (StrictModes,
// OpenSSH misc.c safe_path()) and sudo apply to their own files.
#pragma once

#include <string>

#include "gpunode/result.hpp"

namespace gpunode {

// Checks `path` (a path on this machine, relative to the working directory
// or absolute) by path_safety.hpp's rule. An unsafe one is refused with
// ExitCode::kCannotRun, naming the component and the chmod/chown that fixes
// it; `what` says what the file is for ("trusted key", ...). `otherwise`,
// when not empty, is offered after that fix: for a key, moving it somewhere
// safe; a config file has its fixed place, so only the chmod fits there.
Result<void> check_trust_anchor(
    const std::string& path, const std::string& what,
    const std::string& otherwise =
        "move the key to a directory only root can write");

}  // namespace gpunode
