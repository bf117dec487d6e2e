// Bounds on the work that untrusted input can cause: long loops over a
// bundle or an image archive (hashing, walking an image graph, copying)
// call keep_going() between units of work, so that `--timeout` and the
// first Ctrl-C end them (issue 11, item 7); and running out of descriptors
// or memory is said as what it is, the machine's limit (exit 5), never as
// damage to the input (issue 11, item 6).
#pragma once

#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "gpunode/interrupt.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

using SteadyTime = std::chrono::steady_clock::time_point;
inline constexpr SteadyTime kNoDeadline = SteadyTime::max();

// ok, or why the loop must stop now: the run's deadline passed
// (ExitCode::kTimeout) or a signal asked us to stop (ExitCode::kInterrupted).
// `what` says what was being done, e.g. "verifying /media/x/images/a.tar".
inline Result<void> keep_going(SteadyTime deadline, const std::string& layer,
                               const std::string& what) {
  if (stop_requested()) {
    Error e = interrupted_error(layer);
    e.message += " (while " + what + ")";
    return e;
  }
  if (deadline != kNoDeadline && std::chrono::steady_clock::now() >= deadline)
    return Error{ExitCode::kTimeout, layer,
                 "the --timeout ran out while " + what,
                 "rerun with a longer --timeout (verification reads every "
                 "byte once; a slow USB stick needs minutes per GB)"};
  return {};
}

// A failed open/read/allocation that is the machine's limit rather than the
// input's fault: EMFILE, ENFILE, ENOMEM. Then ExitCode::kCannotRun naming
// the limit and how to raise it; otherwise nullopt (the caller reports the
// input's problem).
inline std::optional<Error> out_of_resources(int err, const std::string& layer,
                                             const std::string& what) {
  if (err == EMFILE) {
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    return Error{
        ExitCode::kCannotRun, layer,
        what + ": " + std::strerror(err) + " (this process may hold " +
            std::to_string(static_cast<unsigned long long>(lim.rlim_cur)) +
            " open files: ulimit -n)",
        "raise the limit, e.g. `ulimit -n 4096` in this shell (or "
        "LimitNOFILE= in the unit), then run the same command again"};
  }
  if (err == ENFILE)
    return Error{ExitCode::kCannotRun, layer,
                 what + ": " + std::strerror(err) +
                     " (the system-wide limit, /proc/sys/fs/file-max, is "
                     "reached)",
                 "close other programs' files or raise fs.file-max (sysctl), "
                 "then run the same command again"};
  if (err == ENOMEM)
    return Error{ExitCode::kCannotRun, layer,
                 what + ": " + std::strerror(err) + " (out of memory)",
                 "free memory on this machine (or raise ulimit -v), then run "
                 "the same command again"};
  return std::nullopt;
}

}  // namespace gpunode
