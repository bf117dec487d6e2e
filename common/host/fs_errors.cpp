#include "gpunode/fs_errors.hpp"

#include <cerrno>

#include "gpunode/text.hpp"

namespace gpunode {

std::string state_write_fix(int err, uid_t euid, const std::string& path) {
  switch (err) {
    case EROFS:
      return "the file system holding " + path +
             " is mounted read-only: remount it read-write (sudo mount -o "
             "remount,rw MOUNTPOINT) or choose another --state-dir";
    case ENOSPC:
    case EDQUOT:
      return "free space on the file system holding " + path +
             ", or choose another --state-dir";
    case ENOTDIR:
    case EEXIST:
      return path +
             " or one of its parents is not a directory: move it away, or "
             "choose another --state-dir";
    case EACCES:
    case EPERM:
      if (euid != 0) return "run as root (sudo), or choose another --state-dir";
      // Root refused: an immutable or append-only attribute, or a security
      // module (AppArmor, SELinux), since mode bits do not stop root.
      return "root was refused: look for an immutable attribute (lsattr -d " +
             shell_word(path) + "; sudo chattr -i " + shell_word(path) +
             ") or an AppArmor/SELinux denial (journalctl -k), or choose "
             "another --state-dir";
    default:
      return "choose another --state-dir";
  }
}

}  // namespace gpunode
