#include "gpunode/trust_anchor.hpp"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

namespace gpunode {
namespace {

// `path` and each directory above it, the path itself first.
std::vector<std::string> chain(std::string path) {
  std::vector<std::string> out;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  while (!path.empty()) {
    out.push_back(path);
    if (path == "/") break;
    const auto slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return out;
}

Result<void> check_chain(const std::string& path, const std::string& what,
                         const std::string& anchor) {
  const uid_t me = ::geteuid();
  bool first = true;
  for (const std::string& p : chain(path)) {
    struct stat st {};
    const bool is_first = first;
    first = false;
    // Missing or unreadable: the caller's read names that; a link's own
    // mode means nothing (its directory guards it, and is checked next).
    if (::lstat(p.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    std::string fix;
    if (st.st_uid != 0 && st.st_uid != me) fix = "chown root " + p;
    const bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
    if ((st.st_mode & 022) != 0 && (is_first || !sticky_dir))
      fix += (fix.empty() ? "" : " && ") + std::string("chmod go-w ") + p;
    if (fix.empty()) continue;
    const std::string who =
        st.st_uid != 0 && st.st_uid != me
            ? "is owned by uid " + std::to_string(st.st_uid)
            : (st.st_mode & 002 ? "is world-writable" : "is group-writable");
    return Error{ExitCode::kCannotRun, "trust",
                 what + " " + anchor + " is not a trust anchor: " + p + " " +
                     who + ", so someone other than root could replace " +
                     (p == anchor ? "it" : "what it holds"),
                 fix + " (or move the key to a directory only root can write)"};
  }
  return {};
}

}  // namespace

Result<void> check_trust_anchor(const std::string& path,
                                const std::string& what) {
  std::string absolute = path;
  if (absolute.empty() || absolute.front() != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) != nullptr)
      absolute = std::string(cwd) + "/" + path;
  }
  if (auto r = check_chain(absolute, what, path); !r) return r;
  char real[PATH_MAX];
  if (::realpath(absolute.c_str(), real) != nullptr && absolute != real)
    return check_chain(real, what, path);
  return {};
}

}  // namespace gpunode
