// Reads the containerd config that k3s renders at every start. Only what the
// handler layer needs is extracted; the parsed TOML never leaves this file,
// so callers see plain structs and errors as values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpunode/host.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

inline constexpr std::string_view kContainerdConfigDir =
    "/var/lib/rancher/k3s/agent/etc/containerd";
inline constexpr std::string_view kContainerdConfigPath =
    "/var/lib/rancher/k3s/agent/etc/containerd/config.toml";
// k3s renders the config; a file this big is not one of its renderings.
inline constexpr std::size_t kMaxContainerdConfigBytes = 1 << 20;

struct ContainerdRuntime {
  std::string name;                         // the handler, e.g. "nvidia"
  std::optional<std::string> runtime_type;  // "io.containerd.runc.v2"
  std::optional<std::string> binary_name;   // options.BinaryName
  std::optional<bool> systemd_cgroup;  // options.SystemdCgroup; nullopt: absent
  int line = 0;  // line of the runtime's table header, 0 if unknown
};

struct ContainerdConfig {
  int version = 0;  // 2 (containerd 1.7) or 3 (containerd 2.x)
  // The CRI plugin that holds the runtimes for this version:
  // "io.containerd.cri.v1.runtime" (v3) or "io.containerd.grpc.v1.cri" (v2).
  std::string cri_plugin;
  std::vector<ContainerdRuntime> runtimes;  // sorted by name
  // `default_runtime_name` under the containerd table; k3s writes it only
  // when started with --default-runtime.
  std::optional<std::string> default_runtime_name;

  const ContainerdRuntime* runtime(std::string_view name) const;
  // "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'nvidia'.options]"
  // (v2 spelling for version 2): the header to quote in a fix.
  std::string runtime_options_header(std::string_view name) const;
};

// Parses a rendered config. `source` names the file in messages. Malformed
// TOML, an unsupported version, or a wrong-typed value in the runtimes the
// installer relies on is Error{ExitCode::kUsage, "handler",
// "<source>:<line>: <what>", <fix>}.
Result<ContainerdConfig> parse_containerd_config(std::string_view text,
                                                 const std::string& source);

// Reads and parses a host path (default: the k3s-rendered config.toml).
// A read failure keeps the file system's error.
Result<ContainerdConfig> load_containerd_config(
    const FileSystem& fs,
    const std::string& path = std::string(kContainerdConfigPath));

}  // namespace gpunode
