#include "gpunode/path_safety.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "gpunode/text.hpp"

namespace gpunode {
namespace {

std::string octal_mode(mode_t mode) {
  std::ostringstream o;
  o << '0' << std::oct << (mode & 07777);
  return o.str();
}

bool trusted_owner(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

std::optional<UnsafeComponent> check_entry(const std::string& path,
                                           const struct stat& st, bool last) {
  if (!trusted_owner(st.st_uid)) {
    return UnsafeComponent{
        path,
        std::string(S_ISLNK(st.st_mode) ? "(a symbolic link) " : "") +
            "is owned by uid " + std::to_string(st.st_uid) + ", not root",
        std::string("sudo chown ") + (S_ISLNK(st.st_mode) ? "-h " : "") +
            "root " + shell_word(path)};
  }
  if (S_ISLNK(st.st_mode)) return std::nullopt;  // a link's mode means nothing
  const bool others_write = (st.st_mode & 022) != 0;
  const bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
  if (others_write && (last || !sticky_dir)) {
    return UnsafeComponent{
        path,
        std::string("is writable by ") +
            ((st.st_mode & 002) != 0 ? "everyone" : "its group") + " (mode " +
            octal_mode(st.st_mode) + ")",
        "sudo chmod go-w " + shell_word(path)};
  }
  return std::nullopt;
}

std::optional<UnsafeComponent> walk(const std::string& real, int depth) {
  if (depth > 8) {
    return UnsafeComponent{real, "has too many symbolic links on the way",
                           "name the real path"};
  }
  struct stat st {};
  if (::lstat("/", &st) == 0) {
    if (auto bad = check_entry("/", st, real == "/")) return bad;
  }
  std::string done;
  std::size_t i = 0;
  while (i < real.size()) {
    std::size_t j = real.find('/', i);
    if (j == std::string::npos) j = real.size();
    const std::string part = real.substr(i, j - i);
    i = j + 1;
    if (part.empty() || part == ".") continue;
    const std::string path = done + "/" + part;
    const bool last = real.find_first_not_of('/', i) == std::string::npos;
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
      return UnsafeComponent{
          path, std::string("cannot be inspected: ") + std::strerror(errno),
          "make " + path + " readable by root"};
    }
    if (auto bad = check_entry(path, st, last)) return bad;
    if (S_ISLNK(st.st_mode)) {
      char target[PATH_MAX];
      if (::realpath(path.c_str(), target) == nullptr) {
        if (errno == ENOENT) return std::nullopt;
        return UnsafeComponent{
            path, std::string("cannot be resolved: ") + std::strerror(errno),
            "name the real path"};
      }
      if (auto bad = walk(target, depth + 1)) return bad;
      done = target;
      continue;
    }
    done = path;
  }
  return std::nullopt;
}

}  // namespace

std::optional<UnsafeComponent> find_unsafe_component(const std::string& real) {
  return walk(real, 0);
}

std::optional<UnsafeComponent> find_unsafe_component(
    const FileSystem& fs, const std::string& host_path) {
  std::string prefix;
  std::size_t i = 0;
  while (i < host_path.size()) {
    std::size_t j = host_path.find('/', i);
    if (j == std::string::npos) j = host_path.size();
    if (j > i) {
      prefix += "/" + host_path.substr(i, j - i);
      const std::string entry = fs.resolve_entry(prefix);
      struct stat st {};
      if (::lstat(entry.c_str(), &st) != 0) break;
      if (S_ISLNK(st.st_mode)) {
        if (auto bad = check_entry(entry, st, false)) return bad;
        // The directory that holds the link guards it.
        const std::string dir = entry.substr(0, entry.rfind('/'));
        if (auto bad = walk(dir.empty() ? "/" : dir, 0)) return bad;
      }
    }
    i = j + 1;
  }
  return walk(fs.resolve(host_path), 0);
}

}  // namespace gpunode
