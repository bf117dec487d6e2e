// Everything the command line decided, validated once in cli/ and then
// read-only for the stages.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/sharing.hpp"

namespace gpunode {

struct Options {
  std::string root = "/";
  std::string state_dir = "/var/lib/gpunode";  // a host path, under root
  Sharing sharing;   // variant, replicas, rename (gpunode/sharing.hpp)
  std::string node;  // empty: discover
  std::string kubeconfig = "/etc/rancher/k3s/k3s.yaml";
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  std::vector<std::string> only;
  std::vector<std::string> skip;
  bool restart_k3s = false;
  bool dry_run = false;
  bool json = false;
  bool color = true;  // still only on a TTY and without NO_COLOR
  int verbosity = 0;
  std::optional<std::string> min_driver;  // dotted version, e.g. "550.54.15"
  // The device plugin image archive (a real path, e.g. on the USB stick; not
  // under --root) and the reference it must hold (images/images.lock).
  std::optional<std::string> image_archive;
  std::string image_ref;
  // The offline bundle (a real path, e.g. the USB stick; never written to)
  // and who may have made it.
  std::optional<std::string> bundle;
  std::vector<std::string> trust_keys;
  std::string trust_keys_origin = "--trust-key";  // or GPUNODE_TRUST_KEYS, ...
  bool insecure_skip_signature = false;
  bool replace_existing = false;  // remove another NVIDIA device plugin first
  bool smoke = false;             // run a CUDA Pod at the end
  std::string smoke_image;
};

// A Kubernetes node name (RFC 1123 subdomain): lower-case letters, digits,
// '-' and '.', at most 253 characters; so never "/" or "..".
bool valid_node_name(const std::string& name);

}  // namespace gpunode
