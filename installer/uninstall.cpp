#include "gpunode/uninstall.hpp"

#include <unistd.h>

#include <algorithm>

#include "containerd/ctr_client.hpp"
#include "containerd/mirror_share.hpp"
#include "gpunode/journal.hpp"
#include "gpunode/run_lock.hpp"
#include "gpunode/state_dir.hpp"
#include "kube/manifests.hpp"
#include "plan/node_plan.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "run/cluster_facts.hpp"

namespace gpunode {
namespace {

// Removes `ref` from k3s's containerd, with the pinned name@digest an
// import for the embedded registry mirror added (containerd/mirror_share.hpp)
// that would keep its content. false: it was not there.
Result<bool> remove_image(CtrClient& ctr, const std::string& ref,
                          Reporter& report) {
  auto found = ctr.find(ref);
  if (!found) return found.error();
  if (!*found) {
    report.info("uninstall", "image " + ref + ": not present");
    return false;
  }
  if ((*found)->has_label(kK3sPinnedLabel, "pinned")) {
    report.warning("uninstall",
                   "k3s imports " + ref +
                       " from /var/lib/rancher/k3s/agent/images/: it comes "
                       "back at the next k3s start unless that file goes");
  }
  if (auto removed = ctr.remove(ref); !removed) return removed.error();
  const std::string by_digest = digest_reference(ref, (*found)->digest);
  auto named = ctr.find(by_digest);
  if (!named) return named.error();
  if (*named) {
    if (auto r = ctr.remove(by_digest); !r) return r.error();
  }
  report.info("uninstall", "image " + ref + ": removed");
  return true;
}

}  // namespace

ExitCode run_uninstall(Host& host, const Options& opts, bool keep_image,
                       Reporter& report) {
  std::vector<StageOutcome> outcomes;
  // The run's scope, role and kubeconfig, once there is a run to have them
  // (the independent try of issue 26 found uninstall's result without).
  Context* run = nullptr;
  auto identity = [&] {
    return run ? run->run_identity() : kube::json::object();
  };
  auto fail = [&](const Error& e) {
    report.error(e);
    report.result("uninstall", e.exit, e.message, outcomes, identity());
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
  auto lock = RunLock::acquire(host.fs(), opts.state_dir);
  if (!lock) return fail(lock.error());

  Context ctx(host, opts, host.clock().steady_now() + opts.timeout);
  run = &ctx;
  auto kube = ctx.cluster();
  for (const auto& [layer, text] : ctx.take_warnings())
    report.warning(layer, text);
  if (!kube) return fail(kube.error());
  // The cluster part's objects, the last made first (plan/node_plan.hpp).
  std::vector<ClusterObject> owned = owned_cluster_objects();
  std::reverse(owned.begin(), owned.end());
  if (!ctx.carries_cluster_part()) {
    // The node part's uninstall (an agent, the kubelet's identity): the
    // cluster's objects serve every GPU node and stay.
    report.info("uninstall",
                "the DaemonSet, ConfigMap and RuntimeClass serve every GPU "
                "node: kept (gpunode uninstall on a server removes them)");
    owned.clear();
  }
  if (ctx.carries_node_part()) {
    // This node's GPU labels go (server-side apply of none, as the manager
    // that set them), so the DaemonSet leaves it: on an agent, and on a
    // single-node server too (the independent try of issue 25 found them
    // left there, unmentioned).
    auto node = ctx.node();
    if (!node) return fail(node.error());
    // What the Node carried before, to say whether anything went: a rerun
    // removes nothing and must not say it did.
    auto before = (*kube)->get("/api/v1/nodes/" + *node, ctx.deadline);
    if (!before) return fail(before.error());
    auto cleared = (*kube)->apply(
        "/api/v1/nodes/" + *node,
        kube::json{
            {"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", *node}, {"labels", kube::json::object()}}}},
        ctx.deadline);
    if (!cleared) return fail(cleared.error());
    const auto labels_of = [](const kube::json& n) {
      return n.value("metadata", kube::json::object())
          .value("labels", kube::json::object());
    };
    if (*before && labels_of(**before) == labels_of(*cleared)) {
      report.info("uninstall",
                  "node " + *node + ": no GPU labels of gpunode's");
    } else {
      report.info("uninstall", "node " + *node + ": GPU labels removed");
      outcomes.push_back({"labels", "removed"});
    }
  } else {
    report.info("uninstall",
                "each GPU node's own labels (nvidia.com/gpu.present, "
                "nvidia.com/gpu.count) stay: gpunode uninstall on that node "
                "removes them");
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

  if (!keep_image && ctx.carries_node_part()) {
    CtrClient ctr(host.proc(), std::chrono::minutes(1));
    // The device plugin image, and the CUDA sample `install --smoke`
    // imports and pins from the bundle: both are there for gpunode alone.
    std::vector<std::pair<std::string, std::string>> images = {
        {"image", opts.image_ref}};
    if (opts.smoke_image != opts.image_ref)
      images.push_back({"smoke-image", opts.smoke_image});
    for (const auto& [what, ref] : images) {
      auto removed = remove_image(ctr, ref, report);
      if (!removed) return fail(removed.error());
      if (*removed) outcomes.push_back({what, "removed"});
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
                outcomes, identity());
  return ExitCode::kOk;
}

}  // namespace gpunode
