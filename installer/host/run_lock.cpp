// flock(2) on <state-dir>/lock. The kernel drops the lock when the process
// dies, however it dies, so a crashed run never blocks the next one. The
// file is never written: the loser finds the holder in /proc/locks.
#include "gpunode/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "gpunode/fs_errors.hpp"
#include "gpunode/text.hpp"

namespace gpunode {
namespace {

Error not_a_lock(const std::string& host_path, const std::string& why) {
  return Error{ExitCode::kCannotRun, "preflight",
               "refusing the lock file " + host_path + ": " + why +
                   "; root would write through it",
               "remove it (sudo rm " + shell_word(host_path) +
                   "); the next run makes a new one"};
}

// "pid N: ARGV" of the process holding a flock on inode `ino`, from the
// kernel's lock table (/proc/locks: "1: FLOCK  ADVISORY  WRITE PID
// MAJ:MIN:INODE 0 EOF"; a waiter's line has "->" after its number); "" when
// it cannot be seen (no /proc, another PID namespace). Only the inode is
// compared: on overlayfs the table names the upper layer's device.
std::string lock_holder(ino_t ino) {
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream in(line);
    std::string number, kind, advisory, access, pid, where;
    in >> number >> kind;
    if (kind == "->") continue;
    in >> advisory >> access >> pid >> where;
    const std::size_t colon = where.rfind(':');
    if (kind != "FLOCK" || colon == std::string::npos ||
        where.substr(colon + 1) != std::to_string(ino))
      continue;
    std::ifstream cmdline("/proc/" + pid + "/cmdline", std::ios::binary);
    std::string argv((std::istreambuf_iterator<char>(cmdline)),
                     std::istreambuf_iterator<char>());
    while (!argv.empty() && argv.back() == '\0') argv.pop_back();
    std::replace(argv.begin(), argv.end(), '\0', ' ');
    if (argv.size() > 200) argv = argv.substr(0, 200) + "...";
    return "pid " + pid + (argv.empty() ? std::string() : ": " + argv);
  }
  return "";
}

}  // namespace

Result<std::unique_ptr<RunLock>> RunLock::acquire(
    const FileSystem& fs, const std::string& state_dir) {
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
    const std::string who = lock_holder(st.st_ino);
    return Error{
        ExitCode::kCannotRun, "preflight",
        "another gpunode run holds " + host_path +
            (who.empty() ? std::string() : " (" + who + ")"),
        "wait for it to finish; the lock is released when that process exits"};
  }
  // Nothing is written: the holder is found from the kernel's lock table
  // when another run needs to name it, so a run that changes nothing
  // leaves the state directory exactly as it was (issue 24).
  return std::unique_ptr<RunLock>(new RunLock(std::move(lock)));
}

RunLock::~RunLock() = default;  // closing the descriptor releases the lock

}  // namespace gpunode
