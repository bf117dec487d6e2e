// What to tell the operator when a file operation under gpunode's own state
// fails: the errno decides the fix, and so does who we are (telling root to
// "run as root" helps nobody).
#pragma once

#include <sys/types.h>

#include <string>

namespace gpunode {

// The fix for a failed create or write of `path` (a host path), given the
// errno of the failure and the effective uid of this process.
std::string state_write_fix(int err, uid_t euid, const std::string& path);

}  // namespace gpunode
