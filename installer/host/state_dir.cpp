#include "gpunode/state_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace gpunode {
namespace {

std::string octal_mode(mode_t mode) {
  std::ostringstream o;
  o << '0' << std::oct << (mode & 07777);
  return o.str();
}

Error unsafe(const std::string& state_dir, const std::string& why,
             const std::string& fix) {
  return Error{
      ExitCode::kCannotRun, "preflight",
      "state dir " + state_dir + " is not safe for root to write: " + why,
      fix +
          ", or choose a --state-dir whose every parent only root "
          "can change"};
}

bool trusted_owner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

// Walks `real` (a path on this machine) from "/" down. `display` names the
// state dir in messages.
Result<void> check_chain(const std::string& real, const std::string& display,
                         int depth) {
  if (depth > 8) {
    return unsafe(display, "too many symbolic links on the way",
                  "point --state-dir at the real directory");
  }
  std::string done;
  std::size_t i = 0;
  // The root directory itself first.
  struct stat st {};
  if (::lstat("/", &st) == 0 &&
      (!trusted_owner(st.st_uid) || (st.st_mode & 022) != 0)) {
    return unsafe(display,
                  "/ is owned by uid " + std::to_string(st.st_uid) +
                      " with mode " + octal_mode(st.st_mode),
                  "sudo chown root / && sudo chmod go-w /");
  }
  while (i < real.size()) {
    std::size_t j = real.find('/', i);
    if (j == std::string::npos) j = real.size();
    const std::string part = real.substr(i, j - i);
    i = j + 1;
    if (part.empty() || part == ".") continue;
    const std::string path = done + "/" + part;
    const bool last = i >= real.size();
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return {};  // made later, by us
      return unsafe(display,
                    "cannot inspect " + path + ": " + std::strerror(errno),
                    "make " + path + " readable by root");
    }
    if (S_ISLNK(st.st_mode)) {
      if (!trusted_owner(st.st_uid)) {
        return unsafe(display,
                      "the symbolic link " + path + " is owned by uid " +
                          std::to_string(st.st_uid),
                      "sudo chown -h root " + path);
      }
      char target[PATH_MAX];
      if (::realpath(path.c_str(), target) == nullptr) {
        if (errno == ENOENT) return {};
        return unsafe(display,
                      "cannot resolve " + path + ": " + std::strerror(errno),
                      "point --state-dir at the real directory");
      }
      if (auto r = check_chain(target, display, depth + 1); !r) return r;
      done = target;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      return Error{ExitCode::kCannotRun, "preflight",
                   "state dir " + display + ": " + path + " is not a directory",
                   "move " + path + " away, or choose another --state-dir"};
    }
    if (!trusted_owner(st.st_uid)) {
      return unsafe(
          display,
          path + " is owned by uid " + std::to_string(st.st_uid) + ", not root",
          "sudo chown root " + path);
    }
    const bool others_write = (st.st_mode & 022) != 0;
    const bool sticky = (st.st_mode & S_ISVTX) != 0;
    if (others_write && (last || !sticky)) {
      return unsafe(display,
                    path + " is writable by " +
                        ((st.st_mode & 002) != 0 ? "everyone" : "its group") +
                        " (mode " + octal_mode(st.st_mode) + ")",
                    "sudo chmod go-w " + path);
    }
    done = path;
  }
  return {};
}

}  // namespace

Result<void> check_state_dir_safe(const FileSystem& fs,
                                  const std::string& state_dir) {
  // With --root, resolve() follows links inside the root before the walk
  // below sees the path, so the host's own links are checked here, each as
  // the host would see it: owned by root, in a directory only root changes.
  std::string prefix;
  std::size_t i = 0;
  while (i < state_dir.size()) {
    std::size_t j = state_dir.find('/', i);
    if (j == std::string::npos) j = state_dir.size();
    if (j > i) {
      prefix += "/" + state_dir.substr(i, j - i);
      const std::string entry = fs.resolve_entry(prefix);
      struct stat st {};
      if (::lstat(entry.c_str(), &st) != 0) break;
      if (S_ISLNK(st.st_mode)) {
        if (!trusted_owner(st.st_uid)) {
          return unsafe(state_dir,
                        "the symbolic link " + prefix + " is owned by uid " +
                            std::to_string(st.st_uid),
                        "sudo chown -h root " + entry);
        }
        const std::string dir = entry.substr(0, entry.rfind('/'));
        if (auto r = check_chain(dir.empty() ? "/" : dir, state_dir, 0); !r)
          return r;
      }
    }
    i = j + 1;
  }
  return check_chain(fs.resolve(state_dir), state_dir, 0);
}

Result<void> prepare_state_dir(FileSystem& fs, const std::string& state_dir) {
  // Before creating anything: a directory made under an unsafe parent would
  // be a change the refusal leaves behind.
  if (auto r = check_state_dir_safe(fs, state_dir); !r) return r;
  if (auto r = fs.create_directories(state_dir); !r) return r;
  return check_state_dir_safe(fs, state_dir);
}

}  // namespace gpunode
