// A simulated GPU node for end-to-end tests: a host tree (test/sim/
// host-tree.sh), the shared real containerd, the simulated k3s API with its
// device plugin model, and a device plugin image archive; plus the commands
// an operator would run against it.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "containerd_fixture.hpp"
#include "k3s_sim.hpp"
#include "test_support.hpp"

namespace gpunode::test {

inline const std::string kNodePath = "/api/v1/nodes/gpu-node-1";
inline const std::string kDsPath =
    "/apis/apps/v1/namespaces/kube-system/daemonsets/"
    "nvidia-device-plugin-daemonset";
inline const std::string kCmPath =
    "/api/v1/namespaces/kube-system/configmaps/nvidia-device-plugin-config";
inline const std::string kRcPath = "/apis/node.k8s.io/v1/runtimeclasses/nvidia";

struct SimGpuNode {
  TempDir dir;
  std::string root = dir.path() + "/node";
  std::string archive = dir.path() + "/k8s-device-plugin.tar";
  Containerd& ctd = Containerd::shared();
  std::unique_ptr<K3sSim> sim;
  int gpus;

  // plugin_start_ms: how long the simulated plugin pod takes to advertise
  // after the DaemonSet changes (long enough, and allocatable is reliably
  // still "needed" when gpunode first checks it, however loaded the machine).
  explicit SimGpuNode(const std::string& scenario = "good-v3",
                      int gpu_count = 1, int plugin_start_ms = 50);
  std::vector<std::string> env() const;
  // gpunode ARGS --root <root>, with env() (+ `extra_env`).
  Run gpunode(std::vector<std::string> args,
              const std::vector<std::string>& extra_env = {});
  // install --image-archive <archive> [--timeout 60s] EXTRA
  Run install(std::vector<std::string> extra = {},
              const std::vector<std::string>& extra_env = {});
  std::vector<std::string> install_argv(
      std::vector<std::string> extra = {}) const;
  Run kubectl(std::vector<std::string> args);
  std::string allocatable(const std::string& resource = "nvidia.com/gpu");
  std::string plugin_pod();  // the plugin pods' names, space-separated
  // An archive of the smoke stage's CUDA sample image (the locked ref),
  // built under dir; not imported.
  std::string cuda_sample_archive();
};

// Another NVIDIA device plugin as the Helm chart installs it (seed 004's
// node: release nvdp in namespace nvidia-device-plugin), for kubectl apply.
std::string helm_device_plugin_yaml();

// What an install leaves behind, as far as the result goes: the objects as
// applied (not the server's bookkeeping: resourceVersion, uid, timestamps),
// allocatable, containerd's image (digest and labels), the journal and the
// state directory's file names. Two converged runs compare equal.
struct EndState {
  nlohmann::json runtimeclass, daemonset, configmap;
  std::string allocatable;
  std::string image;  // "digest labels" as `ctr images ls` lists them
  std::map<std::string, std::string> journal;  // stage -> result
  int last_exit = -1;
  bool last_finished = false;
  std::vector<std::string> state_dir;  // file names

  bool operator==(const EndState& o) const;
};
std::ostream& operator<<(std::ostream& os, const EndState& s);

EndState end_state(SimGpuNode& node);
// The device plugin image's line in `ctr images ls`: "digest labels", or "".
std::string image_line(SimGpuNode& node);
// `ctr images check` calls the device plugin image complete.
bool image_complete(SimGpuNode& node);

}  // namespace gpunode::test
