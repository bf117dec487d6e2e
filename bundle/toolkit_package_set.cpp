// The set check behind `bundle create --toolkit-packages DIR`: a directory
// holds NVIDIA's four toolkit packages (toolkit_packages.hpp) of one family,
// architecture and version, read from the files' own metadata. Every
// problem is collected and named together, so one run tells the operator
// all that is wrong with a directory.
#include "gpunode/toolkit_package_set.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "gpunode/package_formats.hpp"
#include "gpunode/terminal_text.hpp"
#include "gpunode/text.hpp"
#include "gpunode/work_limits.hpp"

namespace gpunode::bundle {
namespace {

constexpr const char* kLayer = "bundle";

Error set_error(const std::string& dir, const std::vector<std::string>& what) {
  const std::string message =
      "--toolkit-packages " + terminal_safe(dir) + ": " + join(what, "; ");
  return Error{ExitCode::kUsage, kLayer, message,
               "put exactly NVIDIA's four container toolkit packages of one "
               "version, family and architecture in each directory"};
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "a (x), b (y)": each file with the value it disagrees on.
std::string listing(const std::vector<ToolkitPackageFile>& files,
                    std::string PackageInfo::*field) {
  std::vector<std::string> items;
  for (const auto& f : files)
    items.push_back(terminal_safe(f.path) + " (" +
                    terminal_safe(f.info.*field) + ")");
  return join(items);
}

}  // namespace

std::string package_bundle_file(const PackageInfo& info) {
  if (info.family == "deb") {
    const auto colon = info.version.find(':');
    const std::string version = colon == std::string::npos
                                    ? info.version
                                    : info.version.substr(colon + 1);
    return "packages/deb/" + info.name + "_" + version + "_" + info.arch +
           ".deb";
  }
  return "packages/rpm/" + info.name + "-" + info.version + "." + info.arch +
         ".rpm";
}

std::string ignored_files_note(const std::string& dir,
                               const std::vector<std::string>& names) {
  constexpr std::size_t kNamed = 3;
  if (names.size() == 1)
    return "ignoring " + dir + "/" + names[0] + " (not a .deb or .rpm)";
  std::vector<std::string> shown(
      names.begin(), names.begin() + std::min(names.size(), kNamed));
  std::string list;
  if (names.size() > kNamed) {
    list =
        join(shown) + " and " + std::to_string(names.size() - kNamed) + " more";
  } else {
    list = join({shown.begin(), shown.end() - 1}) + " and " + shown.back();
  }
  return "ignoring " + std::to_string(names.size()) + " other files in " + dir +
         " (not .deb or .rpm): " + list;
}

Result<ToolkitPackageSet> check_toolkit_package_set(
    const std::string& dir, std::vector<ToolkitPackageFile> files) {
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  if (files.empty()) return set_error(dir, {"it holds no .deb or .rpm file"});
  std::vector<std::string> problems;
  for (auto field :
       {&PackageInfo::family, &PackageInfo::arch, &PackageInfo::version}) {
    std::set<std::string> values;
    for (const auto& f : files) values.insert(f.info.*field);
    if (values.size() > 1) {
      const char* what = field == &PackageInfo::family ? "families"
                         : field == &PackageInfo::arch ? "architectures"
                                                       : "versions";
      problems.push_back(std::string("it mixes ") + what + ": " +
                         listing(files, field));
    }
  }
  const PackageInfo& first = files.front().info;
  if (problems.empty() && first.arch != package_arch(first.family, "x86_64") &&
      first.arch != package_arch(first.family, "aarch64")) {
    problems.push_back("NVIDIA publishes no toolkit for architecture " +
                       terminal_safe(first.arch) + " (" +
                       package_arch(first.family, "x86_64") + " and " +
                       package_arch(first.family, "aarch64") + " only)");
  }
  std::map<std::string, std::vector<std::string>> by_name;
  for (const auto& f : files) by_name[f.info.name].push_back(f.path);
  for (const auto& [name, paths] : by_name) {
    const bool known =
        std::find(kToolkitPackageNames.begin(), kToolkitPackageNames.end(),
                  name) != kToolkitPackageNames.end();
    std::string where;
    for (const auto& p : paths)
      where += (where.empty() ? "" : ", ") + terminal_safe(p);
    if (!known) {
      problems.push_back(terminal_safe(name) + " (" + where +
                         ") is not one of the toolkit's packages");
    } else if (paths.size() > 1) {
      problems.push_back(name + " is there " + std::to_string(paths.size()) +
                         " times: " + where);
    }
  }
  for (std::string_view name : kToolkitPackageNames) {
    if (!by_name.count(std::string(name))) {
      problems.push_back("it lacks " + std::string(name));
    }
  }
  if (!problems.empty()) return set_error(dir, problems);

  ToolkitPackageSet set;
  set.dir = dir;
  set.family = first.family;
  set.arch = first.arch;
  set.version = first.version;
  for (std::string_view name : kToolkitPackageNames) {
    for (auto& f : files) {
      if (f.info.name == name) set.files.push_back(std::move(f));
    }
  }
  return set;
}

Result<ToolkitPackageSet> read_toolkit_package_dir(
    const std::string& dir,
    const std::function<void(const std::string&)>& note) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) {
    const int err = errno;
    if (auto limit = out_of_resources(err, kLayer, "cannot read " + dir))
      return *limit;
    return Error{
        err == ENOENT || err == ENOTDIR ? ExitCode::kUsage : ExitCode::kBlocked,
        kLayer,
        "--toolkit-packages " + terminal_safe(dir) + ": " + std::strerror(err),
        {}};
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::vector<ToolkitPackageFile> files;
  std::vector<std::string> refused;
  std::vector<std::string> ignored;
  for (const auto& name : names) {
    const std::string path = dir + "/" + name;
    // Named as a package: it must be one. Named otherwise: its content
    // decides (a .deb saved as notes.txt is taken, the vendor's README is
    // not).
    const bool named = ends_with(name, ".deb") || ends_with(name, ".rpm");
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      return Error{
          ExitCode::kBlocked,
          kLayer,
          "cannot read " + terminal_safe(path) + ": " + std::strerror(errno),
          {}};
    }
    // A bundle carries no links (verify refuses one), and what is copied
    // must be what was read.
    if (S_ISLNK(st.st_mode) || !S_ISREG(st.st_mode)) {
      if (!named)
        ignored.push_back(name);
      else
        refused.push_back(terminal_safe(path) +
                          (S_ISLNK(st.st_mode) ? " is a symbolic link"
                                               : " is not a regular file"));
      continue;
    }
    if (!named) {
      auto format = package_file_format(path);
      if (!format) return format.error();
      if (*format == PackageFormat::kNeither) {
        ignored.push_back(name);
        continue;
      }
    }
    auto info = read_package_info(path);
    if (!info) return info.error();
    files.push_back({path, std::move(*info)});
  }
  if (note && !ignored.empty()) note(ignored_files_note(dir, ignored));
  if (!refused.empty()) return set_error(dir, refused);
  auto set = check_toolkit_package_set(dir, std::move(files));
  if (set) set->ignored = std::move(ignored);
  return set;
}

Result<std::vector<ToolkitPackageSet>> read_toolkit_package_dirs(
    const std::vector<std::string>& dirs,
    const std::function<void(const std::string&)>& note) {
  std::vector<ToolkitPackageSet> sets;
  for (const auto& dir : dirs) {
    auto set = read_toolkit_package_dir(dir, note);
    if (!set) return set.error();
    for (const auto& other : sets) {
      if (other.family == set->family && other.arch == set->arch) {
        return set_error(dir, {"it holds the " + set->family + " " + set->arch +
                               " set that " + terminal_safe(other.dir) +
                               " holds already; give one directory per "
                               "family and architecture"});
      }
    }
    sets.push_back(std::move(*set));
  }
  return sets;
}

Result<void> confirm_copied_package(const std::string& copy,
                                    const ToolkitPackageFile& file) {
  auto now = read_package_info(copy);
  if (!now) return now.error();
  const PackageInfo& was = file.info;
  if (now->family != was.family || now->name != was.name ||
      now->version != was.version || now->arch != was.arch) {
    return Error{ExitCode::kUsage, kLayer,
                 terminal_safe(file.path) +
                     " changed while the bundle was made (it was " + was.name +
                     " " + was.version + " " + was.arch + ", its copy is " +
                     terminal_safe(now->name) + " " +
                     terminal_safe(now->version) + " " +
                     terminal_safe(now->arch) + ")",
                 "run bundle create again once the files stay put"};
  }
  return {};
}

}  // namespace gpunode::bundle
