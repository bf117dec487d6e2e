// The only file-system code that touches the OS. Every path it takes is a
// host path; with --root it lives under that directory, and symbolic links are
// followed inside the root, the way the host itself would see them.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>

#include "gpunode/crash_point.hpp"
#include "gpunode/fs_errors.hpp"
#include "gpunode/system_host.hpp"
#include "gpunode/unique_fd.hpp"

namespace gpunode {
namespace {

// A crash between writing a temporary file and renaming it over `name`
// leaves "name.tmp-XXXXXX" behind; the next write of the same file (made
// under the same run lock) removes it, so crashes do not pile up litter.
void remove_stale_temps(const std::string& dir, const std::string& name) {
  DIR* d = ::opendir(dir.empty() ? "/" : dir.c_str());
  if (d == nullptr) return;
  const std::string prefix = name + ".tmp-";
  while (const dirent* e = ::readdir(d)) {
    const std::string entry = e->d_name;
    if (entry.size() == prefix.size() + 6 && entry.rfind(prefix, 0) == 0)
      ::unlinkat(::dirfd(d), e->d_name, 0);
  }
  ::closedir(d);
}

std::deque<std::string> split_path(const std::string& path) {
  std::deque<std::string> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

std::string errno_text(int err) { return std::strerror(err); }

FileInfo to_info(const struct stat& st) {
  FileInfo info;
  if (S_ISREG(st.st_mode))
    info.type = FileInfo::Type::kRegular;
  else if (S_ISDIR(st.st_mode))
    info.type = FileInfo::Type::kDirectory;
  info.size = static_cast<std::uint64_t>(st.st_size);
  info.mode = st.st_mode & 07777;
  info.uid = st.st_uid;
  info.mtime = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) +
          std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  return info;
}

class RootedFileSystem : public FileSystem {
 public:
  explicit RootedFileSystem(std::string root) : root_(std::move(root)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  }

  std::string resolve(const std::string& host_path) const override {
    if (root_ == "/") return host_path;
    // Walk component by component so that a link to "/usr/bin/x" means
    // "<root>/usr/bin/x", not the machine's own /usr/bin/x.
    std::deque<std::string> pending = split_path(host_path);
    std::vector<std::string> done;
    int links = 0;
    while (!pending.empty()) {
      std::string part = std::move(pending.front());
      pending.pop_front();
      if (part == ".") continue;
      if (part == "..") {
        if (!done.empty()) done.pop_back();
        continue;
      }
      std::string candidate = join(done) + "/" + part;
      struct stat st {};
      if (links < 40 && ::lstat((root_ + candidate).c_str(), &st) == 0 &&
          S_ISLNK(st.st_mode)) {
        ++links;
        std::string target(static_cast<std::size_t>(st.st_size) + 1, '\0');
        ssize_t n = ::readlink((root_ + candidate).c_str(), target.data(),
                               target.size());
        if (n >= 0) {
          target.resize(static_cast<std::size_t>(n));
          if (!target.empty() && target[0] == '/') done.clear();
          auto parts = split_path(target);
          pending.insert(pending.begin(), parts.begin(), parts.end());
          continue;
        }
      }
      done.push_back(std::move(part));
    }
    return root_ + join(done);
  }

  bool is_symlink(const std::string& host_path) const override {
    struct stat st {};
    return ::lstat(resolve_entry(host_path).c_str(), &st) == 0 &&
           S_ISLNK(st.st_mode);
  }

  std::optional<FileInfo> stat(const std::string& host_path) const override {
    struct stat st {};
    if (::stat(resolve(host_path).c_str(), &st) != 0) return std::nullopt;
    return to_info(st);
  }

  Result<std::string> read_file(const std::string& host_path,
                                std::size_t max_bytes) const override {
    const std::string real = resolve(host_path);
    // O_NONBLOCK: opening a FIFO for reading blocks until a writer comes, so
    // a FIFO where a config file should be would hang the run. It is refused
    // below like any other non-regular file.
    int fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      const int e = errno;
      // Permissions are the one failure that running as root cures.
      return Error{
          e == EACCES || e == EPERM ? ExitCode::kCannotRun : ExitCode::kUsage,
          "file",
          "cannot read " + host_path + ": " + errno_text(e),
          {}};
    }
    const UniqueFd guard(fd);
    struct stat st {};
    if (::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
      const char* kind = S_ISDIR(st.st_mode)    ? "it is a directory"
                         : S_ISFIFO(st.st_mode) ? "it is a FIFO, not a file"
                         : S_ISSOCK(st.st_mode) ? "it is a socket, not a file"
                                                : "it is not a regular file";
      return Error{ExitCode::kUsage,
                   "file",
                   "cannot read " + host_path + ": " + kind,
                   {}};
    }
    // Back to blocking reads (a regular file never blocks, but be plain).
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::string data;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Error{ExitCode::kUsage,
                     "file",
                     "cannot read " + host_path + ": " + errno_text(errno),
                     {}};
      }
      if (n == 0) break;
      if (data.size() + static_cast<std::size_t>(n) > max_bytes) {
        return Error{ExitCode::kUsage,
                     "file",
                     host_path + " is larger than " +
                         std::to_string(max_bytes) +
                         " bytes; refusing to read it",
                     {}};
      }
      data.append(buf, static_cast<std::size_t>(n));
    }
    return data;
  }

  bool is_executable_file(const std::string& host_path) const override {
    const std::string real = resolve(host_path);
    struct stat st {};
    if (::stat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    return (st.st_mode & 0111) != 0;
  }

  std::vector<std::string> list_dir(
      const std::string& host_path) const override {
    std::vector<std::string> names;
    DIR* dir = ::opendir(resolve(host_path).c_str());
    if (dir == nullptr) return names;
    while (dirent* e = ::readdir(dir)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  Result<void> create_directories(const std::string& host_path) override {
    std::string path;
    std::vector<std::string> made;  // real paths, outermost first
    for (const auto& part : split_path(host_path)) {
      path += "/" + part;
      const std::string real = resolve(path);
      if (::mkdir(real.c_str(), 0755) == 0) {
        made.push_back(real);
        continue;
      }
      const int err = errno;
      struct stat st {};
      if (err == EEXIST && ::stat(real.c_str(), &st) == 0 &&
          S_ISDIR(st.st_mode))
        continue;
      // Leave the host as it was: remove what this call made, innermost
      // first (each is empty: only this call put anything in it).
      for (auto it = made.rbegin(); it != made.rend(); ++it)
        ::rmdir(it->c_str());
      return Error{
          ExitCode::kCannotRun, "file",
          "cannot create directory " + host_path + ": " + path +
              (err == EEXIST ? std::string(" exists and is not a directory")
                             : ": " + errno_text(err)),
          state_write_fix(err == EEXIST ? ENOTDIR : err, ::geteuid(), path)};
    }
    return {};
  }

  std::optional<std::uint64_t> free_bytes(
      const std::string& host_path) const override {
    std::string path = host_path;
    for (;;) {
      struct statvfs vfs {};
      if (::statvfs(resolve(path).c_str(), &vfs) == 0) {
        return static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
      }
      if (path == "/" || path.empty()) return std::nullopt;
      const std::size_t slash = path.rfind('/');
      path = slash == 0 ? "/" : path.substr(0, slash);
    }
  }

  Result<void> write_file_atomic(const std::string& host_path,
                                 const std::string& content,
                                 unsigned mode) override {
    // The entry itself, its last component not followed: the rename below
    // then replaces a symbolic link found there, in --root mode as with
    // --root /, and never writes to the link's target.
    const std::string real = resolve_entry(host_path);
    const std::string dir = real.substr(0, real.rfind('/'));
    remove_stale_temps(dir, real.substr(real.rfind('/') + 1));
    std::string tmp = real + ".tmp-XXXXXX";
    // mkostemp opens with O_CREAT | O_EXCL: it never opens an existing file
    // or follows a link planted under the temporary's name.
    int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
    auto fail = [&](const std::string& what) -> Result<void> {
      const int err = errno;
      Error e{
          ExitCode::kCannotRun, "file",
          "cannot write " + host_path + " (" + what + "): " + errno_text(err),
          state_write_fix(err, ::geteuid(), host_path)};
      if (fd >= 0) ::close(fd);
      ::unlink(tmp.c_str());
      return e;
    };
    if (fd < 0) return fail("create temporary file");
    if (::fchmod(fd, mode) != 0) return fail("chmod");
    std::size_t off = 0;
    while (off < content.size()) {
      ssize_t n = ::write(fd, content.data() + off, content.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail("write");
      }
      off += static_cast<std::size_t>(n);
    }
    if (::fsync(fd) != 0) return fail("fsync");
    if (::close(fd) != 0) {
      fd = -1;
      return fail("close");
    }
    fd = -1;
    crash_point("atomic-write:temp");
    if (::rename(tmp.c_str(), real.c_str()) != 0) return fail("rename");
    crash_point("atomic-write:renamed");
    // The rename is durable only once the directory entry is.
    int dfd = ::open(dir.empty() ? "/" : dir.c_str(),
                     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return {};
  }

 private:
  static std::string join(const std::vector<std::string>& parts) {
    std::string out;
    for (const auto& p : parts) out += "/" + p;
    return out;
  }

  std::string root_;
};

}  // namespace

std::string FileSystem::resolve_entry(const std::string& host_path) const {
  std::string path = host_path;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return resolve(path);
  const std::string name = path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return resolve(path);
  std::string parent = resolve(slash == 0 ? "/" : path.substr(0, slash));
  if (parent.empty() || parent.back() != '/') parent += '/';
  return parent + name;
}

std::unique_ptr<FileSystem> make_rooted_file_system(const std::string& root) {
  return std::make_unique<RootedFileSystem>(root);
}

}  // namespace gpunode
