#include "containerd/runtime_search.hpp"

#include <algorithm>

namespace gpunode {

const std::vector<std::string>& runtime_search_dirs() {
  // k3s: runtimesPath = "/usr/local/nvidia/toolkit:/opt/kwasm/bin" in front
  // of $PATH; the unit k3s runs under gets systemd's default PATH.
  static const std::vector<std::string> dirs = {std::string(kNvidiaToolkitDir),
                                                "/opt/kwasm/bin",
                                                "/usr/local/sbin",
                                                "/usr/local/bin",
                                                "/usr/sbin",
                                                "/usr/bin",
                                                "/sbin",
                                                "/bin"};
  return dirs;
}

const std::vector<RuntimeCandidate>& nvidia_runtime_candidates() {
  // From findNvidiaContainerRuntimes in k3s pkg/agent/containerd/runtimes.go.
  static const std::vector<RuntimeCandidate> candidates = {
      {"nvidia", std::string(kNvidiaRuntimeBinary)},
      {"nvidia-experimental", "nvidia-container-runtime-experimental"},
      {"nvidia-cdi", "nvidia-container-runtime.cdi"},
  };
  return candidates;
}

const FoundRuntime* RuntimeSearch::find(std::string_view handler) const {
  for (const auto& f : found) {
    if (f.handler == handler) return &f;
  }
  return nullptr;
}

std::optional<std::string> RuntimeSearch::nvidia_path() const {
  if (const FoundRuntime* f = find("nvidia")) return f->path;
  return std::nullopt;
}

bool RuntimeSearch::toolkit_dir_shadows() const {
  const std::string prefix = std::string(kNvidiaToolkitDir) + "/";
  return nvidia_locations.size() > 1 &&
         nvidia_locations.front().rfind(prefix, 0) == 0;
}

std::string RuntimeSearch::handler_names() const {
  std::string names;
  for (const auto& f : found) names += (names.empty() ? "" : ", ") + f.handler;
  return names;
}

RuntimeSearch find_nvidia_runtimes(const FileSystem& fs) {
  RuntimeSearch result;
  for (const auto& candidate : nvidia_runtime_candidates()) {
    for (const auto& dir : runtime_search_dirs()) {
      const std::string path = dir + "/" + candidate.binary;
      if (fs.is_executable_file(path)) {
        result.found.push_back({candidate.handler, path});
        break;
      }
    }
  }
  // Every copy of the main binary, so a shadowed one can be named. On a
  // merged-/usr system /bin/x and /usr/bin/x are one file: compare the real
  // paths so that is not mistaken for two installations.
  std::vector<std::string> seen_real;
  for (const auto& dir : runtime_search_dirs()) {
    const std::string path = dir + "/" + std::string(kNvidiaRuntimeBinary);
    if (!fs.stat(path)) continue;
    const std::string real = fs.resolve(path);
    if (std::find(seen_real.begin(), seen_real.end(), real) !=
        seen_real.end()) {
      continue;
    }
    seen_real.push_back(real);
    if (fs.is_executable_file(path)) {
      result.nvidia_locations.push_back(path);
    } else {
      result.not_executable.push_back(path);
    }
  }
  return result;
}

std::optional<std::string> lookup_runtime_binary(const FileSystem& fs,
                                                 const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) return name;
  for (const auto& dir : runtime_search_dirs()) {
    if (fs.is_executable_file(dir + "/" + name)) return dir + "/" + name;
  }
  return std::nullopt;
}

std::optional<std::string> find_k3s_unit(const FileSystem& fs) {
  static const char* const kUnitDirs[] = {
      "/etc/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"};
  for (const char* unit : {"k3s", "k3s-agent"}) {
    for (const char* dir : kUnitDirs) {
      if (fs.stat(std::string(dir) + "/" + unit + ".service")) return unit;
    }
  }
  return std::nullopt;
}

}  // namespace gpunode
