// preflight: can this run work at all? Root (only when something may be
// changed) and a k3s installation on this host. Changes nothing.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "containerd/runtime_search.hpp"
#include "gpunode/image_archive.hpp"
#include "run/cluster_facts.hpp"
#include "run/host_role.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

constexpr const char* kContainerdRoot = "/var/lib/rancher/k3s/agent/containerd";

// How long preflight asks the API server about the node. A server that
// does not answer by then is not preflight's to report: the runtimeclass
// stage, the first to need the cluster, names it (with its full retries).
constexpr std::chrono::seconds kNodeProbe{2};

// A node name the cluster does not know would otherwise be found only by
// the allocatable stage, after the image import and the DaemonSet apply.
// Read-only (GET, and LIST to name the nodes there are); nullopt when the
// node exists or the API cannot tell us now.
std::optional<Check> unknown_node(Context& ctx, const std::string& node) {
  auto kube = ctx.cluster();
  if (!kube) return std::nullopt;
  const auto deadline =
      std::min(ctx.deadline, ctx.host.clock().steady_now() + kNodeProbe);
  auto live = (*kube)->get("/api/v1/nodes/" + node, deadline);
  // The node part's identity, the kubelet's, may read its own Node only
  // (the Node authorizer): a refusal says the name is another node's, a
  // mistyped --node, found here before any layer changes (the independent
  // try of issue 26 saw the image imported first). The client's fix names
  // the kubelet's own Node.
  if (!live && live.error().status == 403 && !ctx.carries_cluster_part())
    return blocked("preflight.other-node", live.error().message,
                   live.error().fix, ExitCode::kUsage);
  if (!live || *live) return std::nullopt;
  const Error e = node_not_in_cluster(ctx, **kube, node, deadline);
  return blocked("preflight.unknown-node", e.message, e.fix, e.exit);
}

// Where this run is (docs/json-events.md, preflight): the k3s unit (its
// name as the handler stage names it, and its file), and the node.
nlohmann::json where_facts(Context& ctx, const std::string& unit_file,
                           const std::string& node) {
  const auto unit = find_k3s_unit(ctx.host.fs());
  return {{"k3s_unit", unit ? nlohmann::json(*unit) : nlohmann::json(nullptr)},
          {"k3s_unit_file", unit_file.empty() ? nlohmann::json(nullptr)
                                              : nlohmann::json(unit_file)},
          {"node", node},
          {"bundle", nullptr}};
}

class PreflightStage : public Stage {
 public:
  std::string_view name() const override { return "preflight"; }
  std::string_view layer() const override { return "preflight"; }

  std::string inputs(Context& ctx) const override {
    return "root=" + ctx.opts.root + "\n";
  }

  Check check(Context& ctx) override {
    std::string unit;
    for (const auto& dir : k3s_unit_dirs()) {
      for (const char* name : {"k3s.service", "k3s-agent.service"}) {
        if (!unit.empty()) break;
        if (ctx.host.fs().stat(dir + "/" + name)) unit = dir + "/" + name;
      }
    }
    const bool binary =
        ctx.host.fs().is_executable_file("/usr/local/bin/k3s") ||
        ctx.host.fs().is_executable_file("/usr/bin/k3s");
    if (unit.empty() && !binary) {
      return blocked("preflight.no-k3s",
                     "k3s is not installed on this host (no k3s.service or "
                     "k3s-agent.service unit, no /usr/local/bin/k3s)",
                     "install k3s from your offline k3s bundle "
                     "(INSTALL_K3S_SKIP_DOWNLOAD=true "
                     "./install.sh), then run gpunode again");
    }
    // The node name is read now, not when the allocatable stage needs it:
    // a bad one must stop the run before the layers below change anything.
    auto node = ctx.node();
    if (!node) {
      return blocked("preflight.node-name", node.error().message,
                     node.error().fix, node.error().exit);
    }
    if (auto missing = unknown_node(ctx, *node)) return *missing;
    nlohmann::json facts = where_facts(ctx, unit, *node);
    // The bundle is checked before anything is taken from it.
    auto bundle = ctx.bundle();
    if (!bundle) {
      return blocked("preflight.bundle", bundle.error().message,
                     bundle.error().fix, bundle.error().exit);
    }
    // The archive the image stage will import (--image-archive, else the
    // bundle's) is verified whole here too (every blob hashed, names, links,
    // platform, an image containerd can unpack), not only by the image
    // stage: that stage comes after runtimeclass, which would already have
    // changed the cluster for an archive that is then refused. The image
    // stage verifies again before importing (the file may change in
    // between); for the ~200 MB device plugin archive the second pass costs
    // a fraction of a second.
    // containerd keeps each image twice (its blobs, and the unpacked
    // snapshot); an import that runs out of disk half-way helps no one.
    // A bundle's other image tars count twice their size.
    std::uint64_t needed_bytes = *bundle ? 2 * (*bundle)->image_bytes : 0;
    std::optional<std::string> archive_path = ctx.opts.image_archive;
    const bool from_bundle =
        !archive_path && *bundle && !(*bundle)->device_plugin_archive.empty();
    if (from_bundle) archive_path = (*bundle)->device_plugin_archive;
    if (archive_path) {
      // Bounded by the run's deadline and stopped by Ctrl-C (a hostile
      // archive must not hold the run).
      auto archive = verify_image_archive(
          *archive_path, ctx.opts.image_ref, host_platform(),
          std::chrono::steady_clock::now() + ctx.time_left());
      if (!archive) {
        return blocked("preflight.image-archive", archive.error().message,
                       archive.error().fix, archive.error().exit);
      }
      // What the archive declares, not the file's size: a compressed
      // archive takes many times its size once imported (issue 11, item 8).
      if (from_bundle) {
        // A real path (the bundle's), not a host path under --root.
        struct stat st {};
        const std::uint64_t counted =
            ::stat(archive_path->c_str(), &st) == 0
                ? 2 * static_cast<std::uint64_t>(st.st_size)
                : 0;
        needed_bytes -= std::min(needed_bytes, counted);
      }
      needed_bytes += archive->stored_bytes + archive->unpacked_bytes;
    }
    const auto free = ctx.host.fs().free_bytes(kContainerdRoot);
    nlohmann::json disk{{"path", kContainerdRoot},
                        {"needed_bytes", needed_bytes}};
    if (free) disk["free_bytes"] = *free;
    if (needed_bytes > 0 && free && *free < needed_bytes) {
      Check c = blocked(
          "preflight.disk",
          std::string("not enough disk for the images under ") +
              kContainerdRoot + ": " + std::to_string(*free / (1024 * 1024)) +
              " MiB free, about " +
              std::to_string(needed_bytes / (1024 * 1024)) +
              " MiB needed (the blobs and their unpacked copy)",
          "free space there (e.g. sudo k3s crictl rmi --prune removes unused "
          "images), then rerun gpunode install");
      c.facts = facts;
      c.facts["disk"] = disk;
      return c;
    }
    Check c = satisfied("preflight.ok",
                        unit.empty() ? "k3s binary found, no systemd unit"
                                     : "k3s installed (" + unit + ")");
    // Who made the bundle is worth a line in every run's output.
    if (*bundle) {
      c.summary += "; " + (*bundle)->summary;
      const VerifiedBundle& b = **bundle;
      facts["bundle"] = {
          {"dir", b.dir},
          {"files", b.files},
          {"bytes", b.bytes},
          {"signer", b.signer.empty() ? nlohmann::json(nullptr)
                                      : nlohmann::json(b.signer)}};
    }
    c.facts = facts;
    c.facts["disk"] = disk;
    if (unit.empty()) {
      c.warnings.push_back(
          "no k3s systemd unit found: gpunode cannot restart k3s for you "
          "(--restart-k3s)");
    }
    return c;
  }

  Result<void> apply(Context&, const Check&) override { return {}; }
};

}  // namespace

std::unique_ptr<Stage> make_preflight_stage() {
  return std::make_unique<PreflightStage>();
}

}  // namespace gpunode
