#include "tree_writes.hpp"

#include <dirent.h>
#include <sys/stat.h>

namespace gpunode::test {

namespace {

std::string times_of(const struct stat& st) {
  return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) +
         "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
         std::to_string(st.st_ctim.tv_sec) + "." +
         std::to_string(st.st_ctim.tv_nsec);
}

void walk(const std::string& base, const std::string& rel, TimesSnapshot& out) {
  struct stat st {};
  if (::lstat((base + rel).c_str(), &st) != 0) return;
  out[rel] = times_of(st);
  if (!S_ISDIR(st.st_mode)) return;
  DIR* d = ::opendir((base + rel).c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  for (const std::string& name : names) walk(base, rel + "/" + name, out);
}

}  // namespace

TimesSnapshot snapshot_times(const std::string& dir) {
  TimesSnapshot out;
  walk(dir, "", out);
  return out;
}

std::vector<std::string> written_between(const TimesSnapshot& before,
                                         const TimesSnapshot& after) {
  std::vector<std::string> out;
  for (const auto& [path, times] : after) {
    auto it = before.find(path);
    if (it == before.end() || it->second != times) out.push_back(path);
  }
  for (const auto& [path, times] : before)
    if (!after.count(path)) out.push_back(path);
  return out;
}

}  // namespace gpunode::test
