// One simulated GPU node for the cluster stages' unit tests (plugin,
// allocatable, runtimeclass, smoke, image): a host on a scratch root with a
// fake clock and a scripted process runner (the one host bed,
// host_bed.hpp), the run's Options, a FakeKubeClient standing for the API
// server, and N GPUs. The ONE place that knows how a stage Context is put
// together and fed (which facts are injected, and how): a test asks context()
// and never touches its fields. Also the builders of the objects a test puts in
// the fake cluster, so no test restates a manifest or an object's shape.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fake_kube_client.hpp"
#include "gpunode/options.hpp"
#include "gpunode/stage.hpp"
#include "gpunode/system_host.hpp"
#include "host_bed.hpp"
#include "kube/manifests.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "scripted_runner.hpp"
#include "test_support.hpp"

namespace gpunode::test {

// A device plugin Pod as kubelet reports it. The defaults are a healthy
// pod of the current template.
struct PluginPod {
  std::string name = "nvidia-device-plugin-daemonset-x7k2p";
  std::string phase = "Running";
  std::string waiting_reason;  // containerStatuses[0].state.waiting
  std::string waiting_message;
  // The pod template's config digest; nullopt: the one the bed renders now.
  std::optional<std::string> config_hash;
  std::string runtime_class = "nvidia";  // empty: no runtimeClassName
  bool deleting = false;                 // metadata.deletionTimestamp set
};

// A DaemonSet of someone else's NVIDIA device plugin (the image is what
// plugin_cluster.cpp recognises it by), optionally installed by Helm.
struct OtherPluginSet {
  std::string ns = "nvidia";
  std::string name = "nvdp-nvidia-device-plugin";
  std::string helm_release;  // empty: not Helm's
};

class ClusterBed {
 public:
  explicit ClusterBed(int gpus = 1);
  ClusterBed(const ClusterBed&) = delete;
  ClusterBed& operator=(const ClusterBed&) = delete;

  // Change before the first context(): the Context reads them as they are.
  Options opts;

  FakeKubeClient& kube() { return *kube_; }
  ScriptedRunner& proc() { return proc_; }
  FakeClock& clock() { return bed_.clock; }
  const std::string& node() const { return node_; }

  // This run's Context, made on first use; deadline = now + opts.timeout.
  Context& context();
  // The next run (e.g. the rerun after an apply): a fresh Context over the
  // same host and cluster.
  void new_run() { context_.reset(); }

  // The device plugin's sharing settings (--variant, --replicas,
  // --rename-shared). Before the first context().
  void sharing(Variant variant, int replicas = 1, bool rename_shared = false);
  // --bundle naming a folder that is not there (signature checks off, so
  // it is the bundle itself that fails). Before the first context().
  void bundle_unusable();

  // As after a stage found the API server not answering (run/cluster_facts.cpp
  // cluster_blocked): the stages after it are told at once.
  void cluster_down();

  // The driver stage's GPU count is not known to the run (it was skipped):
  // the stages must find it themselves. Before the first context().
  void gpus_unknown() { gpus_known_ = false; }
  // The cluster's writes go out as plan sends them (dryRun=All). Before
  // the first context().
  void dry_run_writes() { writes_ = ClusterWrites::kDryRun; }

  // The device plugin as the plugin stage applies it for `opts`.
  DevicePluginPlan rendered() const;
  // The RuntimeClass as the runtimeclass stage applies it.
  static kube::json rendered_runtimeclass();

  // --- whole cluster states ---
  // The DaemonSet (and the time-slicing ConfigMap) as gpunode applies them.
  void plugin_applied();
  // Neither the DaemonSet nor the ConfigMap exists.
  void plugin_absent();
  // The DaemonSets across all namespaces besides ours (read_plugin_state
  // lists them): empty by default.
  void other_daemonsets(const std::vector<OtherPluginSet>& others);
  // This node, advertising `resources` (name -> count) as capacity and
  // allocatable.
  void node_advertises(const std::map<std::string, long long>& resources);
  void node_missing(const std::vector<std::string>& nodes_there);
  void plugin_pods(const std::vector<PluginPod>& pods);
  // Events whose involvedObject is `name`: (reason, message) pairs.
  void events_about(const std::string& name,
                    const std::vector<std::pair<std::string, std::string>>&
                        reason_and_message);
  void pod_log(const std::string& pod, const std::string& text);
  // The log cannot be read (the container never started: a 400).
  void pod_log_unreadable(const std::string& pod);

  // --- objects and paths ---
  kube::json node_object(
      const std::map<std::string, long long>& resources) const;
  kube::json pod_object(const PluginPod& pod) const;
  static kube::json daemonset_object(const OtherPluginSet& other);
  std::string node_path() const { return "/api/v1/nodes/" + node_; }
  // The queries the allocatable stage lists the plugin's pods and events by.
  std::string plugin_pods_path() const;
  // Every node's plugin pods (plugin/gpu_nodes.cpp lists them).
  static std::string all_plugin_pods_path();
  static std::string events_path(const std::string& name);
  static std::string pod_log_path(const std::string& pod);

 private:
  ScriptedRunner proc_;
  // The one host bed: a bare scratch root, running programs through proc_.
  HostBed bed_{"", &proc_};
  std::shared_ptr<FakeKubeClient> kube_;
  std::string node_ = "gpu-node-1";
  GpuInventory gpus_;
  bool gpus_known_ = true;
  std::unique_ptr<Context> context_;
  ClusterWrites writes_ = ClusterWrites::kReal;
};

}  // namespace gpunode::test
