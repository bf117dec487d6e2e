// gpunode's state directory (--state-dir, default /var/lib/gpunode): where
// the run lock and the journal live. Root writes there, so the directory and
// every parent up to "/" must be beyond the reach of other users, as sudo and
// sshd (StrictModes) demand of the files they trust.
#pragma once

#include <string>

#include "gpunode/host.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

// Refuses (exit 5, naming the component and the chmod/chown that fixes it)
// a state dir that path_safety.hpp's rule finds others could change.
// Components that do not exist yet end the check.
Result<void> check_state_dir_safe(const FileSystem& fs,
                                  const std::string& state_dir);

// What install and uninstall do before they take the lock: checks what
// exists of the path, creates the rest (leaving nothing behind on failure),
// and checks again.
Result<void> prepare_state_dir(FileSystem& fs, const std::string& state_dir);

}  // namespace gpunode
