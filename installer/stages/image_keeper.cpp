// An image in k3s's containerd, complete, unpacked and pinned (the image
// stage: the device plugin image, and the CUDA sample with --smoke). An
// air-gapped node can never pull it, so it comes from an archive
// (--image-archive or the bundle), verified blob by blob before import.
//
// Why a CRI pin and nothing else (not also a copy in k3s's images folder):
// in k3s's pkg/agent/containerd/containerd.go, PreloadImages() first runs
// clearLabels(), which lists images labelled io.cattle.k3s.pinned=pinned and
// deletes that label AND io.cri-containerd.pinned from each; labelImages()
// then sets both again only on images imported from
// /var/lib/rancher/k3s/agent/images/ at this start. An image imported and
// pinned by gpunode carries only io.cri-containerd.pinned, so k3s never
// touches it (maintainer confirmation in k3s-io/k3s#11363). Copying the
// archive into the images folder would instead make k3s own the pin: it is
// stripped at each restart and re-added only while the file stays there, and
// with the opt-in .cache.json an unchanged file is not re-imported, so the pin
// is lost (k3s-io/k3s#14265). The CRI pin makes containerd report
// Image.pinned, which kubelet's image GC skips.
#include "stages/image_keeper.hpp"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "containerd/ctr_client.hpp"
#include "containerd/mirror_share.hpp"
#include "containerd/registry_mirror.hpp"
#include "gpunode/crash_point.hpp"
#include "gpunode/image_archive.hpp"
#include "gpunode/images_lock.hpp"
#include "gpunode/interrupt.hpp"

namespace gpunode {
namespace {

using std::chrono::milliseconds;

// ctr answers in milliseconds; an import of a large image takes seconds.
constexpr milliseconds kQueryTimeout = std::chrono::minutes(1);
constexpr milliseconds kImportTimeout = std::chrono::minutes(10);

std::string short_digest(const std::string& d) {
  return d.size() > 19 ? d.substr(0, 19) : d;
}

std::string repo_of(const std::string& ref) {
  const std::size_t slash = ref.rfind('/');
  const std::size_t colon = ref.rfind(':');
  if (colon != std::string::npos &&
      (slash == std::string::npos || colon > slash)) {
    return ref.substr(0, colon);
  }
  return ref;
}

std::string no_archive_fix(const std::string& ref) {
  return "gpunode install --image-archive /path/to/the/archive (an OCI or "
         "docker archive of " +
         ref +
         ", e.g. from the bundle on the USB stick); this node cannot pull it";
}

}  // namespace

Result<std::optional<std::string>> archive_source(Context& ctx,
                                                  const KeptImage& image) {
  const bool device_plugin = image.name == "device-plugin";
  if (device_plugin && ctx.opts.image_archive) return ctx.opts.image_archive;
  auto bundle = ctx.bundle();
  if (!bundle) return bundle.error();
  if (*bundle == nullptr) return std::optional<std::string>();
  const std::string& file = device_plugin ? (*bundle)->device_plugin_archive
                                          : (*bundle)->smoke_archive;
  if (file.empty()) {
    if (!image.required) return std::optional<std::string>();
    return Error{
        ExitCode::kUsage, "image",
        "the bundle " + (*bundle)->dir + " holds no image " + image.ref,
        "make the bundle with the device plugin archive: gpunode "
        "bundle create --image-archive ..."};
  }
  return std::optional<std::string>(file);
}

namespace {

// The image stage's "image" facts (docs/json-events.md): what containerd
// holds under the ref, and the archive an import would read (null: none).
nlohmann::json image_facts(const std::string& ref,
                           const std::optional<ImageRecord>& record,
                           const std::optional<ImageCompleteness>& complete,
                           const std::optional<std::string>& archive) {
  using nlohmann::json;
  return {{"ref", ref},
          {"digest", record ? json(record->digest) : json(nullptr)},
          {"pinned", record && record->has_label(kPinnedLabel, "pinned")},
          {"complete", complete && complete->complete},
          {"unpacked", complete && complete->unpacked},
          {"archive", archive ? json(*archive) : json(nullptr)}};
}

// One image's check and apply: the judgement of what containerd holds
// against the archive, and the import, pin and share that close the gap.
class Keeper {
 public:
  explicit Keeper(const KeptImage& image) : image_(image) {}

  Check check(Context& ctx) {
    const std::string& ref = image_.ref;
    CtrClient ctr(ctx.host.proc(), std::min(kQueryTimeout, ctx.time_left()));
    std::optional<ImageArchiveInfo> archive;
    std::vector<std::string> warnings;
    auto source = archive_source(ctx, image_);
    if (!source) {
      return blocked("image.bundle", source.error().message, source.error().fix,
                     source.error().exit);
    }
    if (*source) {
      auto peek = peek_image_archive(**source, ref);
      if (!peek) {
        // The quick read skips data, so a truncated or damaged archive can
        // look like one that merely lacks its index: the full verification
        // names the real problem.
        auto verified = verify_image_archive(
            **source, ref, host_platform(),
            std::chrono::steady_clock::now() + ctx.time_left());
        if (!verified) peek = verified.error();
        Check c = blocked("image.archive-invalid", peek.error().message,
                          peek.error().fix, peek.error().exit);
        return c;
      }
      archive = *peek;
      const LockedImage& locked = image_.name == "device-plugin"
                                      ? locked_device_plugin_image()
                                      : locked_cuda_sample_image();
      if (ref == locked.ref && !locked.digest.empty() &&
          archive->format == ImageArchiveInfo::Format::kOciLayout &&
          archive->target_digest != locked.digest) {
        warnings.push_back(
            "the archive's " + ref + " is " + archive->target_digest +
            ", not the upstream release's " + locked.digest +
            " (images/images.lock): a re-export or another build");
      }
    }
    auto found = ctr.find(ref);
    if (!found)
      return blocked("image.containerd-unreachable", found.error().message,
                     found.error().fix, found.error().exit);
    const RegistryMirror mirror = read_registry_mirror(ctx.host.fs(), ref);
    Looked looked;
    Check c = judge(ctx, ctr, ref, *found, archive, mirror, looked);
    c.warnings.insert(c.warnings.end(), warnings.begin(), warnings.end());
    if (!mirror.problem.empty()) c.warnings.push_back(mirror.problem);
    c.facts["image"] = image_facts(ref, *found, looked.complete, *source);
    c.facts["mirror"] = mirror.facts();
    // Whether peers can be served the image (null: not looked at, the
    // registry is not mirrored or the image is not there).
    c.facts["mirror"]["shareable"] = looked.shape
                                         ? nlohmann::json(looked.shape->none())
                                         : nlohmann::json(nullptr);
    // What an import would bring into containerd: the archive's members,
    // and what they unpack to (plan adds these up).
    if (c.status == CheckStatus::kNeeded && c.code != "image.unpinned" &&
        c.code != "image.unshared" && archive) {
      c.facts["import_bytes"] = archive->stored_bytes;
      c.facts["unpacked_bytes"] = archive->unpacked_bytes;
    }
    return c;
  }

  Result<void> apply(Context& ctx, const std::string& code) {
    const std::string& ref = image_.ref;
    CtrClient query(ctx.host.proc(), std::min(kQueryTimeout, ctx.time_left()));
    if (code == "image.unshared") return share(query, ref);
    if (code == "image.unpinned") {
      if (auto pinned = query.pin(ref); !pinned) return pinned;
      return share_if_mirrored(ctx, query, ref);
    }

    auto source = archive_source(ctx, image_);
    if (!source) return source.error();
    const std::string path = source->value_or("");
    // Everything is verified before containerd sees a byte: a bad archive
    // leaves the content store exactly as it was.
    auto info = verify_image_archive(
        path, ref, host_platform(),
        std::chrono::steady_clock::now() + ctx.time_left());
    if (!info) return info.error();

    CtrClient importer(ctx.host.proc(),
                       std::min(kImportTimeout, ctx.time_left()));
    importer.set_progress(*ctx.progress);
    Result<void> imported = Result<void>();
    if (info->compressed) {
      // ctr reads only plain tars: decompress on the fly, no temporary copy.
      DecompressedStream stream(path);
      imported = importer.import_stream([&stream] { return stream.next(); },
                                        repo_of(ref));
    } else {
      imported = importer.import_file(path, repo_of(ref));
    }
    crash_point("image-imported");
    if (!imported) {
      // A failed (or Ctrl-C'd) ctr import can leave a record behind, and
      // for docker archives `images check` may even call it complete: drop
      // it, so nothing half-imported claims the name. The next run imports
      // again. This must finish even when the run is being interrupted.
      InterruptShield shield;
      remove_record(query, ref);
      return imported.error();
    }
    auto record = query.find(ref);
    if (!record) return record.error();
    if (!*record) {
      return Error{
          ExitCode::kBlocked, "image",
          "k3s ctr images import finished but " + ref + " is not in containerd",
          "check that the archive names the image " + ref};
    }
    auto identity = identity_of(query, **record, info->format);
    if (!identity) return identity.error();
    if (*identity != info->target_digest) {
      remove_if_broken(query, ref);
      return Error{ExitCode::kIntegrity, "image",
                   "containerd holds " + ref + " as " + *identity +
                       " after the import, but the verified archive has " +
                       info->target_digest,
                   "rerun gpunode install; if it repeats, remove the image "
                   "(sudo k3s ctr -n k8s.io images rm " +
                       ref + ") and rerun"};
    }
    auto complete = query.completeness(ref);
    if (!complete) return complete.error();
    if (!complete->complete) {
      remove_if_broken(query, ref);
      return Error{ExitCode::kIntegrity, "image",
                   ref + " was imported but is incomplete in containerd (" +
                       complete->status + "); the record was removed",
                   "rerun gpunode install with a good archive"};
    }
    if (auto pinned = query.pin(ref); !pinned) return pinned;
    return share_if_mirrored(ctx, query, ref);
  }

 private:
  const KeptImage& image_;

  // What judge() asked containerd, beyond the record: for the facts.
  struct Looked {
    std::optional<ImageCompleteness> complete;
    std::optional<ShareGaps> shape;  // only where the registry is mirrored
  };

  // Compares what containerd holds with what is wanted.
  Check judge(Context& ctx, CtrClient& ctr, const std::string& ref,
              const std::optional<ImageRecord>& record,
              const std::optional<ImageArchiveInfo>& archive,
              const RegistryMirror& mirror, Looked& looked) {
    auto source = archive_source(ctx, image_);
    const std::string archive_path = source ? source->value_or("") : "";
    if (!record) {
      if (!archive && mirror.enabled()) return from_peer(ref, mirror);
      if (!archive && !image_.required) return not_kept(ref);
      if (!archive) {
        return blocked(
            "image.missing",
            ref + " is not in k3s's containerd, and no image archive was given",
            no_archive_fix(ref));
      }
      return needed(
          "image.missing", ref + " is not in k3s's containerd",
          "verify " + archive_path + " and import " + ref + ", then pin it");
    }
    auto complete = ctr.completeness(ref);
    if (!complete) {
      return blocked("image.containerd-unreachable", complete.error().message,
                     complete.error().fix, complete.error().exit);
    }
    looked.complete = *complete;
    std::string differs;
    if (archive) {
      auto identity = identity_of(ctr, *record, archive->format);
      if (!identity) {
        return blocked("image.containerd-unreachable", identity.error().message,
                       identity.error().fix, identity.error().exit);
      }
      if (*identity != archive->target_digest) {
        differs = "containerd holds " + short_digest(*identity) +
                  ", the archive has " + short_digest(archive->target_digest);
      }
    }
    std::string problem = !differs.empty()      ? differs
                          : !complete->complete ? "incomplete in containerd (" +
                                                      complete->status + ")"
                          : !complete->unpacked ? "not unpacked for this node"
                                                : "";
    if (!problem.empty()) {
      if (!archive) {
        return blocked("image.broken", ref + " is in containerd but " + problem,
                       no_archive_fix(ref));
      }
      return needed(
          "image.stale", ref + ": " + problem,
          "verify " + archive_path + " and import it again, then pin it");
    }
    const std::string summary = ref + " (" + short_digest(record->digest) +
                                ") is in k3s's containerd, complete";
    if (!record->has_label(kPinnedLabel, "pinned")) {
      return needed("image.unpinned", summary + ", not pinned",
                    "pin it (" + std::string(kPinnedLabel) +
                        "=pinned) so kubelet's image garbage collection never "
                        "deletes it");
    }
    // A node that takes part in the embedded mirror serves the image to its
    // peers only in the shape Spegel reads (containerd/mirror_share.hpp);
    // an image imported by an earlier gpunode lacks it.
    if (mirror.registry_mirrored) {
      auto gaps = find_share_gaps(ctr, ref, record->digest);
      if (!gaps) {
        return blocked("image.containerd-unreachable", gaps.error().message,
                       gaps.error().fix, gaps.error().exit);
      }
      looked.shape = *gaps;
      if (!gaps->none()) {
        Check c = needed(
            "image.unshared",
            summary +
                ", pinned, but not as the embedded registry mirror "
                "serves it to other nodes (" +
                gaps->text() + ")",
            "name it " + gaps->digest_ref + " (pinned) and label its blobs " +
                gaps->label + " (" + std::to_string(gaps->writes()) +
                " containerd write(s)), as k3s does for the images it "
                "imports (k3s-io/k3s#13221)");
        c.details.push_back("digest " + record->digest);
        return c;
      }
    }
    Check c = satisfied("image.ok", summary + ", pinned");
    c.details.push_back("digest " + record->digest);
    if (record->has_label(kK3sPinnedLabel, "pinned")) {
      c.warnings.push_back(
          "k3s imported this image from /var/lib/rancher/k3s/agent/images/ and "
          "owns its pin: "
          "it removes the pin at every start and restores it only while the "
          "archive stays in "
          "that folder (and, with .cache.json, not for unchanged files: "
          "k3s-io/k3s#14265)");
    }
    return c;
  }

  // No image and nothing to import it from, but the embedded registry
  // mirror is on: the kubelet's pull goes to the local registry endpoint
  // first, which fetches from any node that holds the image.
  static Check from_peer(const std::string& ref, const RegistryMirror& mirror) {
    Check c = satisfied(
        "image.from-peer",
        ref +
            " is not in k3s's containerd; the embedded registry mirror is "
            "on (" +
            mirror.source +
            "), so the kubelet will fetch it from "
            "a peer node that holds it");
    c.warnings.push_back(
        "if no node holds " + ref +
        ", the device plugin pod stays in ImagePullBackOff: import it here "
        "with " +
        no_archive_fix(ref));
    return c;
  }

  // The CUDA sample is missing and there is no archive of it: the smoke
  // stage would fail on it (ErrImageNeverPull), but the device plugin need
  // not wait for that.
  Check not_kept(const std::string& ref) const {
    Check c = satisfied("image.absent",
                        ref + " (" + image_.role +
                            ") is not in k3s's containerd, and there is no "
                            "archive of it to import");
    c.warnings.push_back(
        image_.role + " " + ref +
        " is not in k3s's containerd and the bundle carries none: the smoke "
        "Pod cannot start (ErrImageNeverPull); make the bundle with gpunode "
        "bundle create --pull " +
        ref +
        " (or --image-archive), or import it by hand: sudo k3s ctr -n "
        "k8s.io images import FILE.tar");
    return c;
  }

  static Result<void> share(CtrClient& ctr, const std::string& ref) {
    auto record = ctr.find(ref);
    if (!record) return record.error();
    if (!*record) return {};
    auto gaps = find_share_gaps(ctr, ref, (*record)->digest);
    if (!gaps) return gaps.error();
    return close_share_gaps(ctr, ref, *gaps);
  }

  static Result<void> share_if_mirrored(Context& ctx, CtrClient& ctr,
                                        const std::string& ref) {
    if (!read_registry_mirror(ctx.host.fs(), ref).registry_mirrored) return {};
    return share(ctr, ref);
  }

  // For docker archives ctr writes a manifest of its own; the config digest
  // is the identity both sides share.
  static Result<std::string> identity_of(CtrClient& ctr,
                                         const ImageRecord& record,
                                         ImageArchiveInfo::Format format) {
    if (format == ImageArchiveInfo::Format::kOciLayout) return record.digest;
    auto manifest = ctr.content(record.digest);
    if (!manifest) return manifest.error();
    auto j = nlohmann::json::parse(*manifest, nullptr, false);
    if (j.is_discarded() || !j.contains("config") || !j["config"].is_object()) {
      return std::string(
          record.digest);  // an index: not what a docker archive makes
    }
    return j["config"].value("digest", record.digest);
  }

  // "Nothing half-imported left claiming to be complete": a failed import
  // can still leave an image record behind (FACTS.md), so drop it if it is
  // not complete. A complete one stays; the next check judges it.
  static void remove_if_broken(CtrClient& ctr, const std::string& ref) {
    auto complete = ctr.completeness(ref);
    if (complete && complete->complete) return;
    remove_record(ctr, ref);
  }

  static void remove_record(CtrClient& ctr, const std::string& ref) {
    auto found = ctr.find(ref);
    if (found && *found) (void)ctr.remove(ref);
  }
};

}  // namespace

Check check_kept_image(Context& ctx, const KeptImage& image) {
  return Keeper(image).check(ctx);
}

Result<void> apply_kept_image(Context& ctx, const KeptImage& image,
                              const std::string& code) {
  return Keeper(image).apply(ctx, code);
}

}  // namespace gpunode
