// One gpunode run per host at a time: an exclusive flock on
// <state-dir>/lock, whose content names the holder for the run that loses.
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
  // Fails with ExitCode::kCannotRun naming the current holder.
  static Result<std::unique_ptr<RunLock>> acquire(const FileSystem& fs,
                                                  const std::string& state_dir,
                                                  const std::string& holder);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  explicit RunLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing it releases the lock
};

}  // namespace gpunode
