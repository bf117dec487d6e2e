#include "stages/bundle_facts.hpp"

#include <chrono>
#include <fstream>
#include <sstream>

#include "gpunode/bundle.hpp"
#include "gpunode/bundle_trust.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/images_lock.hpp"

namespace gpunode {
namespace {

constexpr std::uint64_t kMaxManifestBytes = 1024 * 1024;

// Reads a manifest the bundle lists, checking it is still what was just
// verified: a small file, so reading it twice is cheap, and a stick swapped
// or rewritten between the verify and the read must not go unnoticed.
Result<std::string> read_verified(const std::string& dir,
                                  const bundle::FileEntry& entry) {
  const std::string path = dir + "/" + entry.path;
  auto changed = [&](const std::string& why) {
    return Error{ExitCode::kIntegrity, "bundle",
                 path + " changed after the bundle verified (" + why + ")",
                 "is the USB stick still in? run install again"};
  };
  if (entry.size > kMaxManifestBytes) return changed("too large");
  std::ifstream in(path, std::ios::binary);
  if (!in) return changed("cannot read it");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return changed("read error");
  const std::string data = text.str();
  if (data.size() != entry.size || sha256_hex(data) != entry.sha256)
    return changed("its SHA-256 differs");
  return data;
}

}  // namespace

Result<VerifiedBundle> verify_run_bundle(Context& ctx) {
  auto options = bundle::trust_options(ctx.host.fs(), ctx.opts.trust_keys,
                                       ctx.opts.insecure_skip_signature,
                                       ctx.opts.trust_keys_origin);
  if (!options) return options.error();
  options->deadline = std::chrono::steady_clock::now() + ctx.time_left();
  options->progress = ctx.progress;
  auto report = bundle::verify_bundle(*ctx.opts.bundle, *options);
  if (!report) return report.error();
  VerifiedBundle vb;
  vb.dir = *ctx.opts.bundle;
  vb.min_driver = report->manifest.min_driver;
  vb.toolkit_packages = report->manifest.packages;
  std::uint64_t bytes = 0;
  for (const auto& f : report->manifest.files) bytes += f.size;
  vb.files = report->manifest.files.size();
  vb.bytes = bytes;
  if (report->signed_by_trusted_key) vb.signer = report->key_fingerprint;
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
    if (image.ref == ctx.opts.smoke_image)
      vb.smoke_archive = vb.dir + "/" + image.file;
  }
  for (const auto& f : report->manifest.files) {
    if (f.path.rfind("manifests/", 0) != 0) continue;
    auto text = read_verified(vb.dir, f);
    if (!text) return text.error();
    vb.manifests[f.path.substr(10)] = std::move(*text);
  }
  return vb;
}

ManifestTexts manifest_texts_of(const VerifiedBundle* bundle) {
  ManifestTexts texts = ManifestTexts::built_in();
  if (bundle == nullptr) return texts;
  const auto& m = bundle->manifests;
  auto take = [&](const char* name, std::string& into) {
    if (auto it = m.find(name); it != m.end()) into = it->second;
  };
  take("runtimeclass-nvidia.yml", texts.runtimeclass);
  take("nvidia-device-plugin.yml", texts.device_plugin);
  take("nvidia-device-plugin-timeSlicing.yml", texts.time_slicing);
  texts.origin = bundle->dir + "/manifests";
  return texts;
}

}  // namespace gpunode
