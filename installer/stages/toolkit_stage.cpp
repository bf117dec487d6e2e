// toolkit: is nvidia-container-runtime where k3s will look for it? Changes
// nothing: the toolkit comes from the offline package repository, and k3s
// only notices it when it starts, which is the handler stage's business.
#include <nlohmann/json.hpp>
#include <string>

#include "containerd/runtime_search.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

std::string search_path_text() {
  std::string text;
  for (const auto& dir : runtime_search_dirs())
    text += (text.empty() ? "" : ":") + dir;
  return text;
}

// What the search found, as the toolkit stage's facts (docs/json-events.md):
// the runtime the nvidia handler gets, every NVIDIA runtime k3s would
// render, and the copies the first one shadows.
nlohmann::json search_facts(const RuntimeSearch& search) {
  nlohmann::json facts = nlohmann::json::object();
  const auto path = search.nvidia_path();
  if (path) {
    const std::size_t slash = path->rfind('/');
    facts["runtime"] = {
        {"path", *path},
        {"found_in", slash == 0 ? std::string("/") : path->substr(0, slash)}};
  } else {
    facts["runtime"] = nullptr;
  }
  nlohmann::json handlers = nlohmann::json::array();
  for (const auto& f : search.found)
    handlers.push_back({{"handler", f.handler}, {"path", f.path}});
  facts["handlers"] = std::move(handlers);
  nlohmann::json shadowed = nlohmann::json::array();
  if (search.toolkit_dir_shadows()) {
    for (std::size_t i = 1; i < search.nvidia_locations.size(); ++i)
      shadowed.push_back(search.nvidia_locations[i]);
  }
  facts["shadowed"] = std::move(shadowed);
  facts["not_executable"] = search.not_executable;
  return facts;
}

class ToolkitStage : public Stage {
 public:
  std::string_view name() const override { return "toolkit"; }
  std::string_view layer() const override { return "nvidia-container-runtime"; }

  std::string inputs(Context& ctx) const override {
    const RuntimeSearch search = find_nvidia_runtimes(ctx.host.fs());
    std::string text = "root=" + ctx.opts.root + "\n";
    for (const auto& f : search.found)
      text += "runtime=" + f.handler + ":" + f.path + "\n";
    for (const auto& p : search.nvidia_locations)
      text += "location=" + p + "\n";
    return text;
  }

  Check check(Context& ctx) override {
    const RuntimeSearch search = find_nvidia_runtimes(ctx.host.fs());
    const auto unit = find_k3s_unit(ctx.host.fs());
    const std::string restart =
        "sudo systemctl restart " +
        (unit ? *unit : std::string("k3s (or k3s-agent)"));
    const auto path = search.nvidia_path();

    if (!path) {
      Check c = blocked(
          "toolkit.missing",
          "nvidia-container-runtime is not installed where k3s looks for it (" +
              search_path_text() + ")",
          "install the NVIDIA container toolkit from the offline package "
          "repository (sudo apt-get install nvidia-container-toolkit), then " +
              restart +
              ": k3s looks for the runtime only when it starts (or rerun "
              "gpunode with --restart-k3s)");
      c.facts = search_facts(search);
      for (const auto& p : search.not_executable) {
        c.details.push_back(
            p +
            " exists but is not executable, so k3s skips it (sudo chmod 0755 " +
            p + ")");
      }
      for (const auto& f : search.found) {
        c.details.push_back(
            "found " + f.path + " (handler " + f.handler +
            "), but the nvidia handler every GPU pod uses needs "
            "nvidia-container-runtime");
      }
      return c;
    }

    const bool shadowed = search.toolkit_dir_shadows();
    Check c = satisfied(
        shadowed ? "toolkit.shadowed" : "toolkit.ok",
        "nvidia-container-runtime at " + *path + "; k3s creates runtime " +
            (search.found.size() > 1 ? "handlers " : "handler ") +
            search.handler_names() + " when it starts");
    c.facts = search_facts(search);
    for (const auto& f : search.found)
      c.details.push_back(f.handler + " -> " + f.path);
    if (shadowed) {
      // Field failure 7: a GPU operator that was removed leaves its toolkit
      // copy behind, and k3s keeps preferring it over the distribution package.
      std::string others;
      for (std::size_t i = 1; i < search.nvidia_locations.size(); ++i) {
        others += (others.empty() ? "" : ", ") + search.nvidia_locations[i];
      }
      c.warnings.push_back(std::string(kNvidiaToolkitDir) +
                           "/nvidia-container-runtime shadows " + others +
                           ": k3s searches " + std::string(kNvidiaToolkitDir) +
                           " first, so it uses the toolkit-dir binary (a GPU "
                           "operator install), not "
                           "the system package's. If the GPU operator is gone, "
                           "remove the leftover "
                           "directory (sudo rm -r " +
                           std::string(kNvidiaToolkitDir) + ") and " + restart);
    }
    for (const auto& p : search.not_executable) {
      c.warnings.push_back(p + " exists but is not executable; k3s skips it");
    }
    return c;
  }

  Result<void> apply(Context&, const Check&) override { return {}; }
};

}  // namespace

std::unique_ptr<Stage> make_toolkit_stage() {
  return std::make_unique<ToolkitStage>();
}

}  // namespace gpunode
