#include "host/package_manager.hpp"

#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

namespace gpunode {
namespace {

constexpr std::size_t kMaxOsReleaseBytes = 64 * 1024;

bool root_is_slash(const std::string& root) {
  return root.empty() || root == "/";
}

// One KEY=value of os-release(5): the value may be quoted with " or '.
std::string os_release_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + "=") != 0) continue;
    std::string v = line.substr(key.size() + 1);
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') &&
        v.back() == v.front())
      v = v.substr(1, v.size() - 2);
    return v;
  }
  return "";
}

bool names_any(const std::string& words,
               std::initializer_list<const char*> ids) {
  std::istringstream in(words);
  std::string w;
  while (in >> w) {
    for (const char* id : ids)
      if (w == id) return true;
  }
  return false;
}

bool is_dir(const FileSystem& fs, const std::string& path) {
  const auto st = fs.stat(path);
  return st && st->type == FileInfo::Type::kDirectory;
}

}  // namespace

std::string PackageManager::os_text() const {
  if (os_id.empty()) return "an unknown distribution";
  return os_like.empty() ? os_id : os_id + " (like " + os_like + ")";
}

PackageManager detect_package_manager(const FileSystem& fs) {
  PackageManager pm;
  // os-release(5): /etc/os-release, else /usr/lib/os-release.
  for (const char* path : {"/etc/os-release", "/usr/lib/os-release"}) {
    auto text = fs.read_file(path, kMaxOsReleaseBytes);
    if (!text) continue;
    pm.os_id = os_release_value(*text, "ID");
    pm.os_like = os_release_value(*text, "ID_LIKE");
    break;
  }
  const bool deb = fs.stat("/var/lib/dpkg/status").has_value();
  std::string rpm_db;
  for (const char* dir : {"/usr/lib/sysimage/rpm", "/var/lib/rpm"}) {
    if (is_dir(fs, dir)) {
      rpm_db = dir;
      break;
    }
  }
  if (deb && !rpm_db.empty()) {
    const std::string ids = pm.os_id + " " + pm.os_like;
    if (names_any(ids, {"rhel", "fedora", "centos", "suse", "opensuse"})) {
      pm.family = "rpm";
      pm.db = rpm_db;
    } else {
      pm.family = "deb";
      pm.db = "/var/lib/dpkg";
    }
  } else if (deb) {
    pm.family = "deb";
    pm.db = "/var/lib/dpkg";
  } else if (!rpm_db.empty()) {
    pm.family = "rpm";
    pm.db = rpm_db;
  }
  return pm;
}

std::string host_machine() {
  utsname u{};
  if (::uname(&u) != 0) return "";
  return u.machine;
}

std::vector<std::string> query_argv(const PackageManager& pm,
                                    const std::string& root,
                                    const std::vector<std::string>& names) {
  std::vector<std::string> argv;
  if (pm.family == "deb") {
    argv = {"dpkg-query"};
    if (!root_is_slash(root)) argv.push_back("--admindir=" + root + pm.db);
    argv.insert(argv.end(),
                {"-W", "-f", "${Package} ${Version} ${db:Status-Abbrev}\n"});
  } else {
    argv = {"rpm"};
    if (!root_is_slash(root)) argv.insert(argv.end(), {"--root", root});
    // Explicit, so that an rpm whose own default differs (Debian's points
    // at ~/.rpmdb) still reads the database the host's rpm uses.
    argv.insert(argv.end(), {"--dbpath", pm.db, "-q", "--qf",
                             "%{NAME} %{VERSION}-%{RELEASE}\n"});
  }
  argv.insert(argv.end(), names.begin(), names.end());
  return argv;
}

std::string unfinished_state_text(const std::string& abbrev) {
  std::string text;
  switch (abbrev.size() >= 2 ? abbrev[1] : ' ') {
    case 'U':
      text = "unpacked but not configured";
      break;
    case 'F':
      text = "half-configured";
      break;
    case 'H':
      text = "half-installed";
      break;
    case 'W':
      text = "awaiting triggers";
      break;
    case 't':
      text = "with triggers pending";
      break;
    default:
      text = "in state " + abbrev;
  }
  if (abbrev.size() >= 3 && abbrev[2] == 'R') text += ", reinstall required";
  return text;
}

PackageQuery parse_query(const std::string& family, const std::string& out,
                         const std::vector<std::string>& names) {
  PackageQuery query;
  InstalledVersions& found = query.versions;
  for (const auto& n : names) found[n] = std::nullopt;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name, version, status;
    if (!(words >> name >> version)) continue;
    auto it = found.find(name);
    if (it == found.end()) continue;  // "package X is not installed"
    if (family == "deb") {
      // db:Status-Abbrev: desired action, then the package's status; 'i'
      // there is "installed" (dpkg-query(1), --list). A package known only
      // as removed has no version and so no third word.
      if (!(words >> status) || status.size() < 2) continue;
      // The reinst-required flag, or a state between "not installed" and
      // "installed": a transaction stopped there (dpkg-query(1), --list).
      const bool flagged = status.size() >= 3 && status[2] == 'R';
      if (flagged || std::string("UFHWt").find(status[1]) != std::string::npos)
        query.unfinished[name] = {status, version};
      if (status[1] != 'i' || flagged) continue;
    }
    it->second = version;
  }
  return query;
}

namespace {

// rpm -q answers for every name on stdout: "NAME VERSION-RELEASE" or
// "package NAME is not installed" (rpm(8)). A run that did not (a database
// it could not open says so on stderr, and exits 1 all the same) gave no
// answer, whatever its exit code.
bool rpm_named_all(const std::string& out,
                   const std::vector<std::string>& names) {
  std::set<std::string> named;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string first, second;
    words >> first >> second;
    named.insert(first == "package" ? second : first);
  }
  for (const auto& n : names)
    if (!named.count(n)) return false;
  return true;
}

}  // namespace

Result<PackageQuery> installed_versions(ProcessRunner& proc,
                                        const PackageManager& pm,
                                        const std::string& root,
                                        const std::vector<std::string>& names,
                                        std::chrono::milliseconds timeout) {
  const auto argv = query_argv(pm, root, names);
  const ProcessResult r = proc.run(argv, timeout);
  // dpkg-query exits 1 when some name is not installed and 2 on a fatal
  // error, an unreadable database say (dpkg-query(1), EXIT STATUS); rpm -q
  // exits with the count of names it did not find (rpm(8)), so only its
  // larger codes are failures.
  const int most = pm.family == "deb" ? 1 : static_cast<int>(names.size());
  const bool answered =
      !r.not_found && !r.timed_out && !r.interrupted && r.spawn_error.empty() &&
      r.exit_code >= 0 && r.exit_code <= most &&
      (pm.family != "rpm" || r.exit_code == 0 || rpm_named_all(r.out, names));
  if (!answered) {
    return Error{ExitCode::kBlocked, "toolkit",
                 "cannot ask " + argv[0] +
                     " which toolkit packages are "
                     "installed: " +
                     describe_failure(r),
                 "check that " + argv[0] + " works on this host (" + argv[0] +
                     (pm.family == "deb" ? " -W" : " -qa") + ")"};
  }
  return parse_query(pm.family, r.out, names);
}

std::vector<std::string> install_argv(const PackageManager& pm,
                                      const std::string& root,
                                      const std::vector<std::string>& files,
                                      bool oldpackage) {
  std::vector<std::string> argv;
  if (pm.family == "deb") {
    argv = {"dpkg"};
    if (!root_is_slash(root)) argv.push_back("--root=" + root);
    argv.push_back("-i");
  } else {
    argv = {"rpm"};
    if (!root_is_slash(root)) argv.insert(argv.end(), {"--root", root});
    // --nomanifest: rpm reads an argument that is not a package as a
    // manifest, a list of more arguments (rpm(8)); a file on the stick is
    // installed as a package or refused, never read as one.
    argv.insert(argv.end(), {"--dbpath", pm.db, "-U", "--nomanifest"});
    if (oldpackage) argv.push_back("--oldpackage");
  }
  argv.insert(argv.end(), files.begin(), files.end());
  return argv;
}

std::vector<std::string> lock_paths(const PackageManager& pm) {
  if (pm.family == "deb") return {pm.db + "/lock-frontend", pm.db + "/lock"};
  if (pm.family == "rpm") return {pm.db + "/.rpm.lock"};
  return {};
}

std::string LockHolder::text() const {
  if (pid <= 0) return "a process in another PID namespace";
  return "process " + std::to_string(pid) +
         (command.empty() ? "" : " (" + command + ")");
}

std::optional<LockHolder> lock_holder(const std::string& real_path,
                                      const std::string& shown_path) {
  // O_NOFOLLOW: a lock file is never a link; O_NONBLOCK: never wait on a
  // FIFO someone put there.
  const int fd =
      ::open(real_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  const bool asked = ::fcntl(fd, F_GETLK, &fl) == 0;
  ::close(fd);
  if (!asked || fl.l_type == F_UNLCK) return std::nullopt;
  LockHolder holder;
  holder.path = shown_path;
  holder.pid = static_cast<int>(fl.l_pid);
  if (holder.pid > 0) {
    std::ifstream comm("/proc/" + std::to_string(holder.pid) + "/comm");
    std::getline(comm, holder.command);
  }
  return holder;
}

bool says_locked(const ProcessResult& r) {
  const std::string text = r.err + r.out;
  return text.find("locked by another process") != std::string::npos ||
         text.find("can't create transaction lock") != std::string::npos;
}

}  // namespace gpunode
