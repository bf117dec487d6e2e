// Everything the command line decided, validated once in cli/ and then
// read-only for the stages.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/sharing.hpp"

namespace gpunode {

// Which part of the work a run does (README, "Roles on a cluster of many
// nodes"). The node part changes this host (driver, toolkit, handler, image)
// and its own Node's labels, with the kubelet's identity; the cluster part
// applies the RuntimeClass, ConfigMap and DaemonSet with admin credentials
// and waits for every GPU node. kBoth is a single-node server's run.
enum class Scope { kNode, kCluster, kBoth };
const char* scope_name(Scope s);  // "node", "cluster", "both"
std::optional<Scope> parse_scope(const std::string& text);
// How hard the proof presses each GPU (--proof): the CUDA sample on each,
// and DCGM's diagnostic at level 1 (quick: seconds) or 2 (deep: minutes)
// where the host has DCGM.
enum class ProofDepth { kQuick, kDeep };
const char* proof_depth_name(ProofDepth d);  // "quick", "deep"
std::optional<ProofDepth> parse_proof_depth(const std::string& text);

inline bool has_node_part(Scope s) { return s != Scope::kCluster; }
inline bool has_cluster_part(Scope s) { return s != Scope::kNode; }

struct Options {
  std::string root = "/";
  std::string state_dir = "/var/lib/gpunode";  // a host path, under root
  Sharing sharing;   // variant, replicas, rename (gpunode/sharing.hpp)
  std::string node;  // empty: discover
  std::string kubeconfig = "/etc/rancher/k3s/k3s.yaml";
  // --kubeconfig (or a site setting) named it; otherwise a node-scope run
  // uses the kubelet's own (run/host_role.hpp).
  bool kubeconfig_given = false;
  // --scope; unset: by the host's role (run/host_role.hpp).
  std::optional<Scope> scope;
  // --all-nodes: a change of the cluster-wide device plugin settings may
  // change GPU nodes other than this one.
  bool all_nodes = false;
  // --variant, --replicas or --rename-shared (or a site setting) chose the
  // sharing; otherwise a node-scope run takes the cluster's.
  bool sharing_given = false;
  // When only site defaults chose it (no flag): where, e.g.
  // "GPUNODE_VARIANT" or "/etc/gpunode/config.toml:2". A node-part run
  // then takes the cluster's settings and warns when they differ: a site
  // default is not a request to change the cluster (only a flag is).
  std::string sharing_site_origin;
  // `status` given no sharing settings checks the cluster part against the
  // settings the cluster runs (its DaemonSet), not the built-in default:
  // a healthy time-slicing cluster is in place, not "would update".
  bool sharing_from_cluster = false;
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  std::vector<std::string> only;
  std::vector<std::string> skip;
  bool restart_k3s = false;
  // --upgrade-toolkit: install the bundle's toolkit packages over another
  // installed version (stages/toolkit_stage.cpp).
  bool upgrade_toolkit = false;
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
  bool smoke = false;  // prove every GPU at the end (proof/gpu_proof.hpp)
  std::string smoke_image;
  ProofDepth proof = ProofDepth::kQuick;
  // The driver's user-space libraries gpunode dlopens (gpu/nvml.hpp,
  // gpu/cuda_probe.hpp). Not a flag: the defaults are the sonames the driver
  // installs; tests point them at stand-ins they build.
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string cuda_library = "libcuda.so.1";
};

// A Kubernetes node name (RFC 1123 subdomain): lower-case letters, digits,
// '-' and '.', at most 253 characters; so never "/" or "..".
bool valid_node_name(const std::string& name);

}  // namespace gpunode
