#include "gpunode/context.hpp"

#include <spdlog/spdlog.h>

#include "gpu/gpu_probe.hpp"
#include "gpunode/kube.hpp"
#include "kube/dry_run_client.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "run/cluster_facts.hpp"
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
  if (m.error) return *m.error;
  return m.value.get();
}

void Context::adopt_cluster(std::shared_ptr<kube::Client> client) {
  cluster_ = writes_ == ClusterWrites::kDryRun
                 ? kube::make_dry_run_client(std::move(client))
                 : std::move(client);
}

Result<kube::Client*> Context::cluster() {
  if (cluster_down_) return *cluster_down_;
  if (!cluster_ && !cluster_error_) {
    auto client = connect_cluster(host, opts, warnings_);
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

Result<const DevicePluginPlan*> Context::plugin_plan() {
  return memo(plugin_plan_, [&]() -> Result<DevicePluginPlan> {
    auto texts = manifests();
    if (!texts) return texts.error();
    // -vv: one line per run (issue 12's measure: renders per install).
    spdlog::debug("device plugin manifests rendered ({}, {} slot(s) per GPU)",
                  variant_name(opts.sharing.variant), opts.sharing.replicas);
    return plan_device_plugin(opts.sharing, opts.image_ref, **texts);
  });
}

std::vector<std::pair<std::string, std::string>> Context::take_warnings() {
  return std::exchange(warnings_, {});
}

}  // namespace gpunode
