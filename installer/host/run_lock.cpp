// flock(2) on <state-dir>/lock. The kernel drops the lock when the process
// dies, however it dies, so a crashed run never blocks the next one; the
// holder's description in the file is only for the message of the loser.
#include "gpunode/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "gpunode/fs_errors.hpp"

namespace gpunode {
namespace {

Error not_a_lock(const std::string& host_path, const std::string& why) {
  return Error{
      ExitCode::kCannotRun, "preflight",
      "refusing the lock file " + host_path + ": " + why +
          "; root would write through it",
      "remove it (sudo rm " + host_path + "); the next run makes a new one"};
}

}  // namespace

Result<std::unique_ptr<RunLock>> RunLock::acquire(const FileSystem& fs,
                                                  const std::string& state_dir,
                                                  const std::string& holder) {
  const std::string host_path = state_dir + "/lock";
  // The entry itself, never a link's target: O_NOFOLLOW refuses a symbolic
  // link as the last component, and the state dir's own path was resolved
  // inside the root. O_NONBLOCK: a FIFO planted there must not hang us.
  const std::string real = fs.resolve_entry(host_path);
  UniqueFd lock(::open(real.c_str(),
                       O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                       0600));
  const int fd = lock.get();
  if (!lock) {
    const int err = errno;
    if (err == ELOOP) return not_a_lock(host_path, "it is a symbolic link");
    return Error{
        ExitCode::kCannotRun, "preflight",
        "cannot open lock file " + host_path + ": " + std::strerror(err),
        state_write_fix(err, ::geteuid(), host_path)};
  }
  // Only a plain file of ours with a single name: a hard link to another
  // file (say /etc/shadow) would have that file emptied below.
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0)
    why = std::string("cannot inspect it: ") + std::strerror(errno);
  else if (!S_ISREG(st.st_mode))
    why = "it is not a regular file";
  else if (st.st_nlink != 1)
    why = "it has " + std::to_string(st.st_nlink) +
          " names (a hard link to another file)";
  else if (st.st_uid != 0 && st.st_uid != ::geteuid())
    why = "it is owned by uid " + std::to_string(st.st_uid);
  if (!why.empty()) return not_a_lock(host_path, why);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    std::string who(512, '\0');
    ssize_t n = ::pread(fd, who.data(), who.size(), 0);
    who.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0'))
      who.pop_back();
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
  return std::unique_ptr<RunLock>(new RunLock(std::move(lock)));
}

RunLock::~RunLock() {
  // Empty the description so a stale holder is never named; closing the
  // descriptor releases the lock.
  if (::ftruncate(fd_.get(), 0) != 0) {
  }
}

}  // namespace gpunode
