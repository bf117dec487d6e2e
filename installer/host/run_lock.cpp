// flock(2) on <state-dir>/lock. The kernel drops the lock when the process
// dies, however it dies, so a crashed run never blocks the next one; the
// holder's description in the file is only for the message of the loser.
#include "gpunode/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpunode {

Result<std::unique_ptr<RunLock>> RunLock::acquire(const FileSystem& fs,
                                                  const std::string& state_dir,
                                                  const std::string& holder) {
  const std::string host_path = state_dir + "/lock";
  const std::string real = fs.resolve(host_path);
  int fd = ::open(real.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Error{
        ExitCode::kCannotRun, "preflight",
        "cannot open lock file " + host_path + ": " + std::strerror(errno),
        "run as root (sudo), or choose another --state-dir"};
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    std::string who(512, '\0');
    ssize_t n = ::pread(fd, who.data(), who.size(), 0);
    who.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0'))
      who.pop_back();
    ::close(fd);
    return Error{
        ExitCode::kCannotRun, "preflight",
        "another gpunode run holds " + host_path +
            (who.empty() ? std::string() : " (" + who + ")"),
        "wait for it to finish; the lock is released when that process exits"};
  }
  // We hold the lock: now it is safe to rewrite the holder description.
  if (::ftruncate(fd, 0) == 0) {
    std::string text = holder + "\n";
    ssize_t ignored = ::pwrite(fd, text.data(), text.size(), 0);
    (void)ignored;
  }
  return std::unique_ptr<RunLock>(new RunLock(fd));
}

RunLock::~RunLock() {
  // Empty the description so a stale holder is never named; closing the
  // descriptor releases the lock.
  if (::ftruncate(fd_, 0) != 0) {
  }
  ::close(fd_);
}

}  // namespace gpunode
