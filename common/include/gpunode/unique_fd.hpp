// The owning file descriptor: closed when it goes out of scope, movable,
// never copied. Also the owning directory stream (which holds a descriptor
// of its own).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include "gpunode/c_handle.hpp"

namespace gpunode {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }

  // Hands the descriptor over; this no longer closes it.
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

  // Closes the one held (its close result ignored) and takes `fd`.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

  // Closes now and returns close(2)'s result, for a file just written: a
  // write error can surface only there (NFS, a full disk). 0 when none held.
  int close() noexcept {
    const int fd = release();
    return fd < 0 ? 0 : ::close(fd);
  }

 private:
  int fd_ = -1;
};

using DirPtr = CHandle<DIR, closedir>;

}  // namespace gpunode
