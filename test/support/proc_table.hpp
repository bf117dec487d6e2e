// The machine's processes as /proc shows them: what the tests and
// test/tools/run_reaped use to find the processes a test left behind.
// Header-only, so run_reaped needs no library.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace gpunode::test {

struct ProcEntry {
  pid_t ppid = 0;
  pid_t pgid = 0;
  char state = '?';  // 'Z': a zombie, gone but not yet reaped
  bool running() const { return state != 'Z' && state != 'X'; }
};

// /proc/PID/stat: "PID (COMM) STATE PPID PGRP ..."; COMM may hold anything,
// so the fields are read after its last ')'.
inline bool read_proc_entry(pid_t pid, ProcEntry& e) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  return static_cast<bool>(rest >> e.state >> e.ppid >> e.pgid);
}

inline std::map<pid_t, ProcEntry> proc_table() {
  std::map<pid_t, ProcEntry> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* de = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(de->d_name, &end, 10);
    if (end == de->d_name || *end != '\0') continue;
    ProcEntry e;
    if (read_proc_entry(static_cast<pid_t>(pid), e))
      out[static_cast<pid_t>(pid)] = e;
  }
  ::closedir(d);
  return out;
}

// `root` and every process below it (by parent), in `table`.
inline std::set<pid_t> tree_of(pid_t root,
                               const std::map<pid_t, ProcEntry>& table) {
  std::set<pid_t> tree{root};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, e] : table) {
      if (tree.count(e.ppid) && tree.insert(pid).second) grew = true;
    }
  }
  return tree;
}

}  // namespace gpunode::test
