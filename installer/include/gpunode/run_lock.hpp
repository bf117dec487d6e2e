// One gpunode run per host at a time: an exclusive flock on
// <state-dir>/lock; the run that loses names the holder from /proc/locks.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "gpunode/host.hpp"
#include "gpunode/result.hpp"
#include "gpunode/unique_fd.hpp"

namespace gpunode {

class RunLock {
 public:
  // Fails with ExitCode::kCannotRun naming the current holder (its pid and
  // command line, from /proc/locks). Writes nothing to the lock file.
  static Result<std::unique_ptr<RunLock>> acquire(const FileSystem& fs,
                                                  const std::string& state_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  explicit RunLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the lock
};

}  // namespace gpunode
