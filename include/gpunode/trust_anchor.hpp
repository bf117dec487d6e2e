// Whether a file may be trusted as an anchor (a publisher key, the
// trusted-keys directory): nobody but root, or the user running gpunode, can
// have written it or replaced it. The same rule sshd (StrictModes,
// OpenSSH misc.c safe_path()) and sudo apply to their own files.
#pragma once

#include <string>

#include "gpunode/result.hpp"

namespace gpunode {

// Checks `path` (a real path on this machine) and every directory above it,
// up to /, both as named and with links resolved. A component that is
// group- or world-writable, or owned by a user other than root and the
// effective user, is refused with ExitCode::kCannotRun, naming the path and
// the chmod/chown that fixes it; `what` says what the file is for
// ("trusted key", ...). A directory above the file with the sticky bit
// (/tmp) is accepted: others may add entries there but never replace ours.
Result<void> check_trust_anchor(const std::string& path,
                                const std::string& what);

}  // namespace gpunode
