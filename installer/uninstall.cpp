#include "gpunode/uninstall.hpp"

#include <unistd.h>

#include "containerd/ctr_client.hpp"
#include "containerd/mirror_share.hpp"
#include "gpunode/journal.hpp"
#include "gpunode/run_lock.hpp"
#include "gpunode/state_dir.hpp"
#include "kube/manifests.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "run/cluster_facts.hpp"

namespace gpunode {
namespace {

struct Owned {
  std::string what;
  std::string path;
};

}  // namespace

ExitCode run_uninstall(Host& host, const Options& opts, bool keep_image,
                       Reporter& report) {
  std::vector<StageOutcome> outcomes;
  auto fail = [&](const Error& e) {
    report.error(e);
    report.result("uninstall", e.exit, e.message, outcomes);
    return e.exit;
  };
  if (host.effective_uid() != 0) {
    return fail(Error{
        ExitCode::kCannotRun, "preflight",
        "uninstall changes the cluster and containerd and must run as root",
        "sudo gpunode uninstall"});
  }
  if (auto r = prepare_state_dir(host.fs(), opts.state_dir); !r)
    return fail(r.error());
  auto lock =
      RunLock::acquire(host.fs(), opts.state_dir,
                       "pid " + std::to_string(::getpid()) + ", uninstall");
  if (!lock) return fail(lock.error());

  Context ctx(host, opts, host.clock().steady_now() + opts.timeout);
  auto kube = ctx.cluster();
  for (const auto& [layer, text] : ctx.take_warnings())
    report.warning(layer, text);
  if (!kube) return fail(kube.error());
  std::vector<Owned> owned = {
      {daemonset_name(), daemonset_path()},
      {configmap_name(), configmap_path()},
      {"RuntimeClass nvidia", "/apis/node.k8s.io/v1/runtimeclasses/nvidia"},
  };
  if (!has_cluster_part(ctx.scope())) {
    // The node part's uninstall (an agent, the kubelet's identity): the
    // cluster's objects serve every GPU node and stay; this node's GPU
    // labels go (server-side apply of none, as the manager that set them),
    // so the DaemonSet leaves it.
    report.info("uninstall",
                "the DaemonSet, ConfigMap and RuntimeClass serve every GPU "
                "node: kept (gpunode uninstall on a server removes them)");
    owned.clear();
    auto node = ctx.node();
    if (!node) return fail(node.error());
    auto cleared = (*kube)->apply(
        "/api/v1/nodes/" + *node,
        kube::json{
            {"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", *node}, {"labels", kube::json::object()}}}},
        ctx.deadline);
    if (!cleared) return fail(cleared.error());
    report.info("uninstall", "node " + *node + ": GPU labels removed");
    outcomes.push_back({"labels", "removed"});
  }
  for (const auto& o : owned) {
    auto live = (*kube)->get(o.path, ctx.deadline);
    if (!live) return fail(live.error());
    if (!*live) {
      report.info("uninstall", o.what + ": not present");
      continue;
    }
    const auto labels =
        (**live)["metadata"].value("labels", kube::json::object());
    if (labels.value(kManagedByLabel, "") != "gpunode") {
      report.info("uninstall", o.what + ": kept (not created by gpunode)");
      continue;
    }
    auto removed = (*kube)->remove(o.path, ctx.deadline);
    if (!removed) return fail(removed.error());
    report.info("uninstall", o.what + ": removed");
    outcomes.push_back({o.what, "removed"});
  }

  if (!keep_image) {
    CtrClient ctr(host.proc(), std::chrono::minutes(1));
    auto found = ctr.find(opts.image_ref);
    if (!found) return fail(found.error());
    if (!*found) {
      report.info("uninstall", "image " + opts.image_ref + ": not present");
    } else {
      if ((*found)->has_label(kK3sPinnedLabel, "pinned")) {
        report.warning("uninstall",
                       "k3s imports " + opts.image_ref +
                           " from /var/lib/rancher/k3s/agent/images/: it comes "
                           "back at the next k3s start unless that file goes");
      }
      auto removed = ctr.remove(opts.image_ref);
      if (!removed) return fail(removed.error());
      // The pinned name@digest an import for the embedded registry mirror
      // added (containerd/mirror_share.hpp) would keep the content.
      const std::string by_digest =
          digest_reference(opts.image_ref, (*found)->digest);
      auto named = ctr.find(by_digest);
      if (!named) return fail(named.error());
      if (*named) {
        if (auto r = ctr.remove(by_digest); !r) return fail(r.error());
      }
      report.info("uninstall", "image " + opts.image_ref + ": removed");
      outcomes.push_back({"image", "removed"});
    }
  }

  // The history no longer describes the node.
  Journal journal = load_journal(host.fs(), opts.state_dir).journal;
  journal.stages.clear();
  journal.last_run = RunRecord{"uninstall", iso8601_utc(host.clock().now()),
                               iso8601_utc(host.clock().now()), 0};
  if (auto r = save_journal(host.fs(), opts.state_dir, journal); !r)
    return fail(r.error());
  report.result("uninstall", ExitCode::kOk,
                std::to_string(outcomes.size()) + " object(s) removed",
                outcomes);
  return ExitCode::kOk;
}

}  // namespace gpunode
