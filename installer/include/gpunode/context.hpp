// What one run knows: the host, the options, its deadline, and the facts
// stages share. After kubeadm's InitData (cmd/kubeadm/app/cmd/phases/init/
// data.go): each fact is an accessor, computed on first use by one function
// and then kept, errors included, so no stage runs another stage's check()
// to learn something, and no stage fills a fact for a later one.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpunode/bundle.hpp"
#include "gpunode/gpu.hpp"
#include "gpunode/host.hpp"
#include "gpunode/options.hpp"
#include "gpunode/progress.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

namespace kube {
class Client;
}
struct GpuProbe;          // gpu/gpu_probe.hpp
struct ManifestTexts;     // plugin/manifest_texts.hpp
struct DevicePluginPlan;  // plugin/device_plugin_plan.hpp
struct LivePlugin;        // plugin/live_plugin.hpp
struct SlotExpectation;   // plugin/slot_expectation.hpp
struct NodePlan;          // plan/node_plan.hpp
enum class HostRole;      // run/host_role.hpp

// A bundle that passed verification in this run: what the stages take from it.
struct VerifiedBundle {
  std::string dir;
  std::string summary;  // files, bytes, signer
  // The summary's quantities, as preflight's "bundle" facts.
  std::size_t files = 0;
  std::uint64_t bytes = 0;
  std::string signer;  // the trusted key's fingerprint; empty: not checked
  std::string device_plugin_archive;  // real path inside the bundle, or empty
  std::string device_plugin_ref;
  // The smoke stage's image (--smoke-image) in the bundle: real path, or
  // empty when the bundle does not carry it.
  std::string smoke_archive;
  std::string min_driver;  // may be empty
  // The toolkit packages the bundle carries (bundle.toml's [[packages]]),
  // every family and architecture; `file` stays relative to dir.
  std::vector<bundle::PackageEntry> toolkit_packages;
  std::uint64_t image_bytes = 0;  // the image archives' total size
  // manifests/*.yml as the bundle carries them (read once, after their
  // hashes verified), by file name; the stages install these, not the
  // running binary's compiled-in copies.
  std::map<std::string, std::string> manifests;
};

// Facts given to a run instead of found by it: a unit test's recorded
// cluster (test/support/cluster_bed.hpp), its node and its GPUs.
struct KnownFacts {
  std::shared_ptr<kube::Client> cluster;
  std::optional<std::string> node;
  std::optional<GpuInventory> gpus;
};

// How a run's cluster writes go out: for real (install), or each with
// dryRun=All (plan, --dry-run, status), so a read-only command cannot change
// the cluster whatever a stage does (kube/dry_run_client.hpp).
enum class ClusterWrites { kReal, kDryRun };

class Context {
 public:
  Context(Host& host, const Options& opts,
          std::chrono::steady_clock::time_point deadline, KnownFacts known = {},
          ClusterWrites writes = ClusterWrites::kReal);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Host& host;
  const Options& opts;
  // The run's deadline (--timeout from the start). A step that needs time
  // of its own after it (the allocatable diagnosis) takes its own.
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds time_left() const;
  // Where long work (the bundle's verification, the image import) shows
  // how far it is: the command line's renderer (gpunode/progress_display.
  // hpp), else nothing.
  Progress* progress = &no_progress();
  // Says something now, while a stage applies (a package transaction that
  // outlasts an interrupt): the runner's warning line and --json "warning"
  // event; nothing without a runner.
  std::function<void(std::string_view layer, const std::string& text)> notice =
      [](std::string_view, const std::string&) {};

  // Which k3s role this host has (a k3s or k3s-agent unit), and so the
  // scope this run does: --scope, else by the role (run/host_role.hpp).
  HostRole host_role();
  Scope scope();
  // The parts this host carries out, by scope(): the one place a run's
  // scope becomes what it does. The cluster part works with an admin
  // kubeconfig; the node part alone has the kubelet's identity.
  bool carries_node_part() { return has_node_part(scope()); }
  bool carries_cluster_part() { return has_cluster_part(scope()); }
  // Whether this run's identity may read the plugin's DaemonSet: the
  // cluster part's admin one may; the kubelet's may not (RBAC NodeRules
  // grant a node no daemonsets), so a diagnosis then reads pods alone.
  bool identity_reads_daemonsets() { return carries_cluster_part(); }
  // The kubeconfig this run uses: --kubeconfig, else the kubelet's for the
  // node part alone, else k3s's admin one.
  std::string kubeconfig();
  // Which part this run does, on which kind of k3s host, with which
  // credentials: the result event's scope, role and kubeconfig (README,
  // "Roles on a cluster of many nodes"), for every command that has them.
  nlohmann::json run_identity();
  // True for plan, --dry-run and status: every write goes out with dryRun.
  bool previewing() const { return writes_ == ClusterWrites::kDryRun; }

  // One API client per run, from kubeconfig() (run/cluster_facts.cpp).
  Result<kube::Client*> cluster();
  // This run's connection as made (null before cluster() made one): a
  // read-only pass after the run (the evidence record's) reuses it.
  std::shared_ptr<kube::Client> shared_cluster() const { return cluster_; }
  // The cluster cannot be reached at all: cluster() answers `e` from now
  // on, so later stages do not wait out the --timeout again.
  void mark_cluster_down(const Error& e);
  // --node, else node-name in /etc/rancher/k3s/config.yaml, else the host
  // name (run/cluster_facts.cpp).
  Result<std::string> node();
  // What asking the kernel module and the driver found (gpu/gpu_probe.cpp).
  const GpuProbe& gpu_probe();
  // The GPUs, or the driver layer's reason there are none to count.
  Result<const GpuInventory*> gpus();
  // --bundle, verified (stages/bundle_facts.cpp); nullptr without it.
  Result<const VerifiedBundle*> bundle();
  // The manifests this run installs: the bundle's, else the built-in ones.
  Result<const ManifestTexts*> manifests();
  // The device plugin settings the cluster runs now (plugin/
  // live_plugin.hpp): read with admin credentials from the DaemonSet, with
  // the node's from its own plugin pod. Null when there is none (yet): that
  // answer is not kept, since the node part waits for the pod to come.
  Result<const LivePlugin*> live_plugin();
  // The sharing this run wants: the flags' (and site settings'), except on
  // a node-scope run that did not name any, which takes the cluster's.
  Result<Sharing> sharing();
  // The device plugin as this run wants it, rendered once. On a node-scope
  // run, its config digest is the live config's: that is what a current
  // pod on this node carries, whichever gpunode applied it.
  Result<const DevicePluginPlan*> plugin_plan();
  // Each GPU node's slots under plugin_plan(), with the parts the scope
  // carries out: this host (node part) and the cluster's GPU nodes
  // (cluster part). Kept until refresh_expected_slots(). With
  // `need_this_host`, a node part that cannot count this host stops there,
  // before the cluster is asked (the answer says why, and is not kept).
  Result<const SlotExpectation*> expected_slots(bool need_this_host = false);
  // The cluster changed under the expectation (labels, the DaemonSet), or
  // a wait starts from it as it is now.
  void refresh_expected_slots() { expected_slots_ = {}; }
  // This host's part of the plan (plan/node_plan.hpp), made once from
  // node() and gpus(): their error when either cannot be had.
  Result<const NodePlan*> node_plan();
  // As much of the plan as this run has made so far, for `plan` to print
  // (the result's plan.node and plan.nodes); nothing is computed for it.
  nlohmann::json plan_so_far() const;

  // Found while getting a fact (the kubeconfig's), not blocking: the runner
  // reports each once, after the check that found it, as (layer, text).
  std::vector<std::pair<std::string, std::string>> take_warnings();

 private:
  template <typename T>
  struct Memo {
    std::shared_ptr<const T> value;
    std::optional<Error> error;
    bool known() const { return value || error; }
    Result<const T*> kept() const {
      if (error) return *error;
      return value.get();
    }
  };
  template <typename T, typename Make>
  Result<const T*> memo(Memo<T>& m, Make make);
  // Keeps `client`, behind the dry-run client unless writes are real.
  void adopt_cluster(std::shared_ptr<kube::Client> client);

  ClusterWrites writes_;
  std::optional<HostRole> role_;
  std::shared_ptr<const LivePlugin> live_plugin_;
  std::shared_ptr<kube::Client> cluster_;
  std::optional<Error> cluster_error_;
  std::optional<Error> cluster_down_;
  Memo<std::string> node_;
  std::shared_ptr<const GpuProbe> gpu_probe_;
  Memo<VerifiedBundle> bundle_;
  Memo<ManifestTexts> manifests_;
  Memo<DevicePluginPlan> plugin_plan_;
  Memo<SlotExpectation> expected_slots_;
  Memo<NodePlan> node_plan_;
  std::shared_ptr<const SlotExpectation> self_unknown_;
  std::vector<std::pair<std::string, std::string>> warnings_;
};

}  // namespace gpunode
