// libFuzzer target: the kubeconfig reader (yaml-cpp, base64 and PEM checks).
// Files a kubeconfig points to are answered from memory: the second part of
// the input (after a "--" line) is every such file's content, so nothing on
// the host is read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_input.hpp"
#include "gpunode/kube.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const auto parts = gpunode::fuzz::split_parts(data, size);
  const std::string referenced = parts.size() > 1 ? parts[1] : std::string();
  auto read_file =
      [&](const std::string& path) -> gpunode::Result<std::string> {
    if (path.find("missing") != std::string::npos) {
      return gpunode::Error{
          gpunode::ExitCode::kBlocked, "cluster", path + ": no such file", {}};
    }
    return referenced;
  };
  (void)gpunode::kube::parse_kubeconfig(parts[0], "/etc/rancher/k3s/k3s.yaml",
                                        read_file);
  return 0;
}
