// Where k3s finds the NVIDIA container runtimes. k3s looks only once, when it
// starts (SetupContainerdConfig in pkg/agent/containerd/config_linux.go): it
// runs exec.LookPath for each runtime binary over its PATH with
// "/usr/local/nvidia/toolkit:/opt/kwasm/bin" put in front. gpunode repeats
// that search over host paths (so under --root) to predict which handlers k3s
// renders, and to notice a GPU-operator leftover shadowing the system binary.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpunode/host.hpp"

namespace gpunode {

// The directories in the order k3s searches them: the runtimes path first,
// then the PATH of the systemd unit that the k3s install script writes.
const std::vector<std::string>& runtime_search_dirs();

// "/usr/local/nvidia/toolkit": where the GPU operator installs the toolkit.
inline constexpr std::string_view kNvidiaToolkitDir =
    "/usr/local/nvidia/toolkit";

// The binary of the `nvidia` handler, the one every GPU pod uses.
inline constexpr std::string_view kNvidiaRuntimeBinary =
    "nvidia-container-runtime";

struct RuntimeCandidate {
  std::string handler;  // containerd runtime name k3s gives it, e.g. "nvidia"
  std::string binary;   // file name k3s looks for
};

// nvidia, nvidia-experimental, nvidia-cdi: the NVIDIA runtimes k3s knows.
const std::vector<RuntimeCandidate>& nvidia_runtime_candidates();

struct FoundRuntime {
  std::string handler;  // e.g. "nvidia-cdi"
  std::string path;     // host path of the first match, e.g. "/usr/bin/..."
};

struct RuntimeSearch {
  // First match per handler, in nvidia_runtime_candidates() order; what k3s
  // would render if it started now.
  std::vector<FoundRuntime> found;
  // Every executable nvidia-container-runtime on the search path, in search
  // order, with aliases of one file (e.g. /bin -> /usr/bin) listed once.
  std::vector<std::string> nvidia_locations;
  // nvidia-container-runtime files that exist but are not executable: k3s
  // skips them (LookPath wants an execute bit), which surprises people.
  std::vector<std::string> not_executable;

  const FoundRuntime* find(std::string_view handler) const;
  // The path k3s would use for the `nvidia` handler, if any.
  std::optional<std::string> nvidia_path() const;
  // The toolkit dir holds nvidia-container-runtime and another copy exists
  // further down the path: k3s silently prefers the toolkit dir's.
  bool toolkit_dir_shadows() const;
  // "nvidia, nvidia-cdi": the handlers k3s will create, for messages.
  std::string handler_names() const;
};

RuntimeSearch find_nvidia_runtimes(const FileSystem& fs);

// Looks a bare program name up the way containerd's runc shim would (the
// same PATH k3s passes down). An absolute name is returned as is.
std::optional<std::string> lookup_runtime_binary(const FileSystem& fs,
                                                 const std::string& name);

// The systemd unit k3s runs as: "k3s" (server) or "k3s-agent", whichever has
// a unit file in /etc/systemd/system, /lib/systemd/system or
// /usr/lib/systemd/system; a server unit wins when both exist.
std::optional<std::string> find_k3s_unit(const FileSystem& fs);

}  // namespace gpunode
