// k3s's embedded registry mirror (Spegel), as this node's files show it.
// A node takes part when its registries.yaml lists the image's registry
// under `mirrors:` (pkg/spegel/spegel.go, Config.Start: "distribute images
// for all configured mirrors ... just having a key for the registry will
// do"), and the mirror is on when k3s runs with `embedded-registry: true`.
// That flag is the servers' (config.yaml or config.yaml.d/*.yaml); an agent
// learns it from the server, and then k3s puts its local registry endpoint
// in front of every mirror's endpoints (pkg/agent/config/config.go: when
// nodeConfig.EmbeddedRegistry, conf.InternalAddress =
// controlConfig.Loopback(false), conf.RegistryPort = the supervisor port,
// conf.InjectMirror(nodeConfig)), which pkg/agent/containerd/config.go
// (writeContainerdHosts) renders into
// /var/lib/rancher/k3s/agent/etc/containerd/certs.d/<registry>/hosts.toml
// as [host."https://127.0.0.1:<port>/v2"]. That file is how an agent tells.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "gpunode/host.hpp"

namespace gpunode {

inline constexpr const char* kRegistriesYaml =
    "/etc/rancher/k3s/registries.yaml";
inline constexpr const char* kK3sConfigYaml = "/etc/rancher/k3s/config.yaml";
inline constexpr const char* kCertsDir =
    "/var/lib/rancher/k3s/agent/etc/containerd/certs.d";

// "nvcr.io/nvidia/k8s-device-plugin:v0.17.1" -> {"nvcr.io",
// "nvidia/k8s-device-plugin"}; Docker's normalization for names without a
// registry part (docker.io, library/).
struct ImageName {
  std::string registry;
  std::string repository;
};
ImageName split_image_name(const std::string& ref);

struct RegistryMirror {
  std::string registry;            // the image's registry
  bool registry_mirrored = false;  // registries.yaml mirrors: lists it
  // `embedded-registry` as config.yaml(.d) says it; nullopt where they do
  // not (an agent, or a server without it).
  std::optional<bool> embedded_registry;
  // The rendered hosts.toml names k3s's local registry endpoint.
  bool local_endpoint = false;
  std::string source;   // the file that says the mirror is on, or empty
  std::string problem;  // a file that could not be read or parsed

  bool enabled() const {
    return registry_mirrored &&
           (embedded_registry.value_or(false) || local_endpoint);
  }
  // The image stage's "mirror" facts (docs/json-events.md).
  nlohmann::json facts() const;
};

RegistryMirror read_registry_mirror(const FileSystem& fs,
                                    const std::string& image_ref);

}  // namespace gpunode
