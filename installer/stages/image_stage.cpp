// image: the images this node's pods need, in k3s's containerd, complete,
// unpacked and pinned (stages/image_keeper.hpp): the device plugin image
// always, and with --smoke the CUDA sample the smoke Pod runs, from the
// same verified bundle (issue 16). The device plugin image decides the
// stage's code and "image" facts as before; the CUDA sample adds its own
// ("smoke_image"), and never blocks the device plugin: a problem with it is
// a warning, and the smoke stage names the failure it causes.
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "gpunode/image_archive.hpp"
#include "stages/image_keeper.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

std::vector<KeptImage> kept_images(const Context& ctx) {
  std::vector<KeptImage> images = {
      {"device-plugin", ctx.opts.image_ref, "the device plugin image", true}};
  // The smoke Pod's image is only wanted when a smoke run was asked for;
  // importing it otherwise would spend the node's disk on a test image.
  if (ctx.opts.smoke && ctx.opts.smoke_image != ctx.opts.image_ref)
    images.push_back({"cuda-sample", ctx.opts.smoke_image,
                      "the CUDA sample (--smoke)", false});
  return images;
}

// The CUDA sample's codes are told apart from the device plugin's:
// image.missing -> image.cuda-sample-missing.
std::string code_for(const KeptImage& image, const std::string& code) {
  if (image.name == "device-plugin") return code;
  const std::string prefix = "image.";
  return prefix + image.name + "-" + code.substr(prefix.size());
}

// Per image, what its check found: apply() takes its work from these.
nlohmann::json entry(const KeptImage& image, const Check& c) {
  return {{"name", image.name},
          {"ref", image.ref},
          {"code", c.code},
          {"status", c.status == CheckStatus::kSatisfied ? "satisfied"
                     : c.status == CheckStatus::kNeeded  ? "needed"
                                                         : "blocked"}};
}

// The device plugin's check with the CUDA sample's folded in.
Check combine(const KeptImage& image, Check main, Check extra) {
  const std::string prefix = image.role + ": ";
  if (extra.status == CheckStatus::kBlocked) {
    // Not required: a warning with its fix, never a block.
    main.warnings.push_back(prefix + extra.summary + " (" + extra.fix + ")");
  } else if (extra.status == CheckStatus::kNeeded &&
             main.status != CheckStatus::kBlocked) {
    if (main.status == CheckStatus::kSatisfied) {
      main.status = CheckStatus::kNeeded;
      main.code = code_for(image, extra.code);
      main.summary += "; " + prefix + extra.summary;
      main.action = extra.action;
    } else {
      main.summary += "; " + prefix + extra.summary;
      main.action += "; then " + extra.action;
    }
  } else {
    main.summary += "; " + prefix + extra.summary;
  }
  for (const auto& d : extra.details) main.details.push_back(prefix + d);
  for (const auto& w : extra.warnings) main.warnings.push_back(w);
  if (extra.facts.contains("import_bytes")) {
    main.facts["import_bytes"] =
        main.facts.value("import_bytes", std::uint64_t{0}) +
        extra.facts["import_bytes"].get<std::uint64_t>();
    main.facts["unpacked_bytes"] =
        main.facts.value("unpacked_bytes", std::uint64_t{0}) +
        extra.facts.value("unpacked_bytes", std::uint64_t{0});
  }
  main.facts["smoke_image"] = extra.facts.contains("image")
                                  ? extra.facts["image"]
                                  : nlohmann::json(nullptr);
  return main;
}

class ImageStage : public Stage {
 public:
  std::string_view name() const override { return "image"; }
  std::string_view layer() const override { return "device plugin image"; }

  std::string inputs(Context& ctx) const override {
    std::string text =
        "ref=" + ctx.opts.image_ref + "\nplatform=" + host_platform() + "\n";
    for (const KeptImage& image : kept_images(ctx)) {
      if (image.name != "device-plugin") text += "also=" + image.ref + "\n";
      auto source = archive_source(ctx, image);
      if (!source || !*source) continue;
      // Size and mtime stand for the content: hashing a large archive just
      // to describe the inputs would double the work of every run.
      struct stat st {};
      ::stat((*source)->c_str(), &st);
      text += "archive=" + **source + " size=" + std::to_string(st.st_size) +
              " mtime=" + std::to_string(st.st_mtime) + "\n";
    }
    return text;
  }

  Check check(Context& ctx) override {
    const std::vector<KeptImage> images = kept_images(ctx);
    Check c = check_kept_image(ctx, images.front());
    nlohmann::json entries = nlohmann::json::array({entry(images.front(), c)});
    c.facts["smoke_image"] = nullptr;
    // A device plugin image that cannot be judged (containerd unreachable,
    // a bad bundle) ends the check: the CUDA sample would only repeat it.
    if (images.size() > 1 && c.code != "image.containerd-unreachable" &&
        c.code != "image.bundle") {
      Check extra = check_kept_image(ctx, images[1]);
      entries.push_back(entry(images[1], extra));
      c = combine(images[1], std::move(c), std::move(extra));
    }
    c.facts["images"] = std::move(entries);
    return c;
  }

  Result<void> apply(Context& ctx, const Check& needed) override {
    const std::vector<KeptImage> images = kept_images(ctx);
    // A check without its per-image entries names the device plugin's work.
    if (!needed.facts.contains("images"))
      return apply_kept_image(ctx, images.front(), needed.code);
    for (const auto& e : needed.facts["images"]) {
      if (e.value("status", "") != "needed") continue;
      for (const KeptImage& image : images) {
        if (image.name != e.value("name", "")) continue;
        if (auto done = apply_kept_image(ctx, image, e.value("code", ""));
            !done)
          return done;
      }
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<Stage> make_image_stage() {
  return std::make_unique<ImageStage>();
}

}  // namespace gpunode
