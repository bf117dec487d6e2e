#include "stages/bundle_facts.hpp"

#include "gpunode/bundle.hpp"
#include "gpunode/bundle_trust.hpp"
#include "gpunode/images_lock.hpp"

namespace gpunode {

Result<const VerifiedBundle*> verified_bundle(Context& ctx) {
  if (!ctx.opts.bundle) return static_cast<const VerifiedBundle*>(nullptr);
  if (ctx.facts.bundle) return &*ctx.facts.bundle;
  auto options = bundle::trust_options(ctx.host.fs(), ctx.opts.trust_keys,
                                       ctx.opts.insecure_skip_signature);
  if (!options) return options.error();
  auto report = bundle::verify_bundle(*ctx.opts.bundle, *options);
  if (!report) return report.error();
  VerifiedBundle vb;
  vb.dir = *ctx.opts.bundle;
  vb.min_driver = report->manifest.min_driver;
  std::uint64_t bytes = 0;
  for (const auto& f : report->manifest.files) bytes += f.size;
  vb.summary =
      "bundle " + vb.dir +
      " verified: " + std::to_string(report->manifest.files.size()) +
      " files, " + std::to_string(bytes / (1024 * 1024)) + " MiB, " +
      (report->signed_by_trusted_key
           ? "signed by " + report->key_fingerprint.substr(0, 16)
           : std::string("signature not checked (--insecure-skip-signature)"));
  for (const auto& image : report->manifest.images) {
    for (const auto& f : report->manifest.files) {
      if (f.path == image.file) vb.image_bytes += f.size;
    }
    if (image.ref == ctx.opts.image_ref) {
      vb.device_plugin_archive = vb.dir + "/" + image.file;
      vb.device_plugin_ref = image.ref;
    }
  }
  ctx.facts.bundle = std::move(vb);
  return &*ctx.facts.bundle;
}

}  // namespace gpunode
