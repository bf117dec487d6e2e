#include "gpunode/context.hpp"

#include <spdlog/spdlog.h>

#include "evidence/evidence_key.hpp"
#include "gpu/gpu_probe.hpp"
#include "gpunode/kube.hpp"
#include "kube/dry_run_client.hpp"
#include "plan/node_plan.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "plugin/live_plugin.hpp"
#include "plugin/slot_expectation.hpp"
#include "run/cluster_facts.hpp"
#include "run/host_role.hpp"
#include "stages/bundle_facts.hpp"

namespace gpunode {

Context::Context(Host& h, const Options& o,
                 std::chrono::steady_clock::time_point d, KnownFacts known,
                 ClusterWrites writes)
    : host(h), opts(o), deadline(d), writes_(writes) {
  if (known.cluster) adopt_cluster(std::move(known.cluster));
  if (known.node)
    node_.value = std::make_shared<const std::string>(*known.node);
  if (known.gpus) {
    auto probe = std::make_shared<GpuProbe>();
    probe->inventory = *known.gpus;
    gpu_probe_ = probe;
  }
}

Context::~Context() = default;

std::chrono::milliseconds Context::time_left() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - host.clock().steady_now());
  return left.count() > 0 ? left : std::chrono::milliseconds(0);
}

template <typename T, typename Make>
Result<const T*> Context::memo(Memo<T>& m, Make make) {
  if (!m.known()) {
    Result<T> made = make();
    if (made)
      m.value = std::make_shared<const T>(std::move(*made));
    else
      m.error = made.error();
  }
  return m.kept();
}

void Context::adopt_cluster(std::shared_ptr<kube::Client> client) {
  cluster_ = writes_ == ClusterWrites::kDryRun
                 ? kube::make_dry_run_client(std::move(client))
                 : std::move(client);
}

HostRole Context::host_role() {
  if (!role_) role_ = find_host_role(host.fs());
  return *role_;
}

Scope Context::scope() { return default_scope(opts, host_role()); }

std::string Context::kubeconfig() { return kubeconfig_for(opts, scope()); }

nlohmann::json Context::run_identity() {
  return {{"scope", scope_name(scope())},
          {"role", host_role_name(host_role())},
          {"kubeconfig", kubeconfig()}};
}

Result<kube::Client*> Context::cluster() {
  if (cluster_down_) return *cluster_down_;
  if (!cluster_ && !cluster_error_) {
    auto client = connect_cluster(host, kubeconfig(), scope(), warnings_);
    if (client)
      adopt_cluster(std::shared_ptr<kube::Client>(std::move(*client)));
    else
      cluster_error_ = client.error();
  }
  if (cluster_error_) return *cluster_error_;
  return cluster_.get();
}

void Context::mark_cluster_down(const Error& e) { cluster_down_ = e; }

Result<std::string> Context::node() {
  auto name = memo(node_, [&] { return find_node_name(host, opts); });
  if (!name) return name.error();
  return **name;
}

const GpuProbe& Context::gpu_probe() {
  if (!gpu_probe_)
    gpu_probe_ =
        std::make_shared<const GpuProbe>(probe_gpus(host, opts, time_left()));
  return *gpu_probe_;
}

Result<const GpuInventory*> Context::gpus() {
  const GpuProbe& probe = gpu_probe();
  if (probe.inventory) return &*probe.inventory;
  const Check& why = *probe.failure;
  return Error{why.exit, "driver", why.summary, why.fix};
}

Result<const VerifiedBundle*> Context::bundle() {
  if (!opts.bundle) return static_cast<const VerifiedBundle*>(nullptr);
  return memo(bundle_, [&] { return verify_run_bundle(*this); });
}

Result<const ManifestTexts*> Context::manifests() {
  return memo(manifests_, [&]() -> Result<ManifestTexts> {
    auto vb = bundle();
    if (!vb) return vb.error();
    return manifest_texts_of(*vb);
  });
}

Result<const LivePlugin*> Context::live_plugin() {
  if (live_plugin_) return live_plugin_.get();
  auto kube = cluster();
  if (!kube) return kube.error();
  Result<std::optional<LivePlugin>> live = std::optional<LivePlugin>();
  if (has_cluster_part(scope())) {
    live = read_cluster_plugin(**kube, deadline);
  } else {
    auto name = node();
    if (!name) return name.error();
    live = read_node_plugin(**kube, *name, host.clock(), deadline);
  }
  if (!live) return live.error();
  if (!*live) return static_cast<const LivePlugin*>(nullptr);
  live_plugin_ = std::make_shared<const LivePlugin>(**live);
  return live_plugin_.get();
}

namespace {

// Before the DaemonSet has a pod on this node, the node part cannot know
// what the cluster runs (its identity cannot read the DaemonSet).
Error no_plugin_pod_yet() {
  return Error{ExitCode::kBlocked, "plugin",
               "no device plugin pod runs on this node yet, so the cluster's "
               "settings (variant, replicas) are not known here",
               "the cluster part applies the DaemonSet; on a server: sudo "
               "gpunode install --scope cluster"};
}

}  // namespace

Result<Sharing> Context::sharing() {
  // A node-part run given only site defaults takes the cluster's (the
  // plugin stage warns when they differ).
  const bool site_default_only = !opts.sharing_site_origin.empty();
  if (opts.sharing_given && (!site_default_only || carries_cluster_part()))
    return opts.sharing;
  if (has_cluster_part(scope())) {
    if (!opts.sharing_from_cluster) return opts.sharing;
    auto live = live_plugin();
    if (!live) return live.error();
    return *live ? (*live)->sharing : opts.sharing;  // none yet: the default
  }
  auto live = live_plugin();
  if (!live) return live.error();
  if (!*live) return no_plugin_pod_yet();
  return (*live)->sharing;
}

Result<const DevicePluginPlan*> Context::plugin_plan() {
  if (plugin_plan_.known()) return plugin_plan_.kept();
  // Neither is kept when it fails: a node's pod (and so the cluster's
  // settings and config digest) may come later in this run.
  auto wanted = sharing();
  if (!wanted) return wanted.error();
  const LivePlugin* live = nullptr;
  if (!has_cluster_part(scope())) {
    auto found = live_plugin();
    if (!found) return found.error();
    if (!*found) return no_plugin_pod_yet();
    live = *found;
  }
  return memo(plugin_plan_, [&]() -> Result<DevicePluginPlan> {
    auto texts = manifests();
    if (!texts) return texts.error();
    // -vv: one line per run (issue 12's measure: renders per install).
    spdlog::debug("device plugin manifests rendered ({}, {} slot(s) per GPU)",
                  variant_name(wanted->variant), wanted->replicas);
    auto plan = plan_device_plugin(*wanted, opts.image_ref, **texts);
    // What a current pod on this node carries, whichever gpunode (or
    // bundle) applied the cluster part.
    if (plan && live) plan->config_hash = live->config_hash;
    return plan;
  });
}

Result<const NodePlan*> Context::node_plan() {
  return memo(node_plan_, [&]() -> Result<NodePlan> {
    auto name = node();
    if (!name) return name.error();
    auto counted = gpus();
    if (!counted) return counted.error();
    NodePlan plan = plan_node(*name, **counted, opts);
    // A key that cannot be read is the labels stage's to report.
    auto key = read_evidence_public(host.fs(), opts.state_dir);
    if (key && *key) plan.evidence_key = **key;
    return plan;
  });
}

nlohmann::json Context::plan_so_far() const {
  return plan_json(node_plan_.value.get(), expected_slots_.value.get());
}

Result<const SlotExpectation*> Context::expected_slots(bool need_this_host) {
  if (expected_slots_.known()) return expected_slots_.kept();
  auto plan = plugin_plan();
  if (!plan) return plan.error();
  ExpectationSources from;
  from.plan = *plan;
  from.node_part = has_node_part(scope());
  from.cluster_part = has_cluster_part(scope());
  from.deadline = deadline;
  if (from.node_part) {
    from.node = node();
    // What the driver layer counts, whether or not its stage ran.
    if (from.node) from.gpus = gpus();
    if (need_this_host && (!from.node || !from.gpus)) {
      ExpectationSources self_only = from;
      self_only.cluster_part = false;
      auto made = expect_slots(self_only);
      if (!made) return made.error();
      self_unknown_ = std::make_shared<const SlotExpectation>(*made);
      return self_unknown_.get();
    }
  }
  if (from.cluster_part) {
    auto kube = cluster();
    if (!kube) return kube.error();
    from.kube = *kube;
  } else if (auto kube = cluster(); kube) {
    from.kube = *kube;  // this node's own Node: what it advertises now
  }
  // Not kept when it fails: a later stage may find the cluster answering.
  auto made = expect_slots(from);
  if (!made) return made.error();
  expected_slots_.value = std::make_shared<const SlotExpectation>(*made);
  return expected_slots_.value.get();
}

std::vector<std::pair<std::string, std::string>> Context::take_warnings() {
  return std::exchange(warnings_, {});
}

}  // namespace gpunode
