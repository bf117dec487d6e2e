// toolkit: is nvidia-container-runtime where k3s will look for it? When it
// is not and the bundle carries NVIDIA's toolkit packages for this host's
// package family and architecture, install them (one dpkg or rpm
// transaction). k3s only notices the runtime when it starts, which is the
// handler stage's business: it sees containerd's config without the nvidia
// handler and restarts k3s with --restart-k3s, or names the command.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "containerd/runtime_search.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/terminal_text.hpp"
#include "gpunode/text.hpp"
#include "gpunode/toolkit_packages.hpp"
#include "stages/package_copies.hpp"
#include "stages/package_transaction.hpp"
#include "stages/stages.hpp"
#include "stages/toolkit_set.hpp"

namespace gpunode {
namespace {

std::string search_path_text() { return join(runtime_search_dirs(), ":"); }

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
  facts["packages"] = nullptr;  // ToolkitSet::facts, when it is known
  return facts;
}

constexpr std::size_t kQuotedLines = 5;

// The last lines the package manager printed (its errors come last),
// escaped: they quote package metadata from the stick.
std::string last_lines(const ProcessResult& r) {
  const std::string& text =
      r.err.find_first_not_of(" \n") != std::string::npos ? r.err : r.out;
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    if (line.find_first_not_of(" \t\r") != std::string::npos)
      lines.push_back(line);
    start = end + 1;
  }
  if (lines.size() > kQuotedLines)
    lines.erase(lines.begin(), lines.end() - kQuotedLines);
  for (auto& l : lines) l = terminal_safe(l);
  return join(lines, " | ");
}

std::string set_words(const ToolkitSet& set) {
  return set.pm.family + " " + set.arch + " " + set.version;
}

std::string names_text() {
  return join({kToolkitPackageNames.begin(), kToolkitPackageNames.end()});
}

// needed: install (or, with --upgrade-toolkit, change to) the bundle's set.
Check install_check(const ToolkitSet& set, bool upgrade,
                    const RuntimeSearch& search) {
  const std::string what =
      names_text() + " " + set.version + " (" + set.pm.family + " " + set.arch +
      ", " + std::to_string(set.files_to_install().size()) + " file(s), " +
      human_bytes(set.bytes_to_install()) + ") from the bundle";
  Check c =
      upgrade
          ? needed("toolkit.upgrade",
                   "the NVIDIA container toolkit " + set.installed_text() +
                       " is installed; the bundle carries " + set.version,
                   "install " + what + " (--upgrade-toolkit)")
          : needed("toolkit.install",
                   "nvidia-container-runtime is not installed; the "
                   "bundle carries the NVIDIA container toolkit " +
                       set.version + " for " + set.pm.family + " " + set.arch,
                   "install " + what);
  c.facts = search_facts(search);
  c.facts["packages"] = set.facts();
  if (upgrade && set.pm.family == "deb")
    c.details.push_back(
        "dpkg installs an older version too, warning that it downgrades");
  return c;
}

// The version the bundle brings differs from the installed one: only
// --upgrade-toolkit changes it (every GPU container runs through this
// runtime, so the operator decides when it changes).
std::string other_version_text(const ToolkitSet& set) {
  return "the NVIDIA container toolkit " + set.installed_text() +
         " is installed, the bundle carries " + set.version +
         "; rerun with --upgrade-toolkit to install the bundle's";
}

// How the transaction ended, as the package database says afterwards:
// "dpkg finished it: the four packages are installed at 1.17.8-1", or what
// it failed with and what it left.
std::string outcome_text(Context& ctx, const ToolkitSet& set,
                         const std::string& tool, const ProcessResult& r) {
  std::string text = r.succeeded() ? tool + " finished it"
                                   : tool + " failed: " + describe_failure(r);
  // Read back with time of its own (the --timeout may have run out), and
  // to the end: the interrupt that came stops the run after it.
  InterruptShield shield;
  auto query = installed_versions(
      ctx.host.proc(), set.pm, ctx.opts.root,
      {kToolkitPackageNames.begin(), kToolkitPackageNames.end()},
      std::chrono::seconds(30));
  if (!query) return text + "; what it left cannot be read back";
  ToolkitSet now = set;
  now.installed = std::move(query->versions);
  now.unfinished = std::move(query->unfinished);
  if (now.current())
    return text + ", and " + names_text() + " are installed at " + set.version;
  if (!now.unfinished.empty())
    return text + "; it left " + now.unfinished_text() + " (sudo dpkg --audit)";
  return text + "; installed now: " + now.installed_text();
}

class ToolkitStage : public Stage {
 public:
  std::string_view name() const override { return "toolkit"; }
  std::string_view layer() const override { return "nvidia-container-runtime"; }

  std::string inputs(Context& ctx) const override {
    const RuntimeSearch search = find_nvidia_runtimes(ctx.host.fs());
    std::string text = "root=" + ctx.opts.root + "\n";
    text += "bundle=" + ctx.opts.bundle.value_or("") + "\n";
    if (ctx.opts.upgrade_toolkit) text += "upgrade_toolkit\n";
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
    auto found_set = find_toolkit_set(ctx);
    if (!found_set) {
      const Error& e = found_set.error();
      Check c = blocked("toolkit.packages", e.message, e.fix, e.exit);
      c.facts = search_facts(search);
      return c;
    }
    const std::optional<ToolkitSet>& set = *found_set;
    const bool carried = set && set->complete();
    // Without --bundle the package manager is asked all the same: the runtime
    // on disk proves nothing after a dpkg killed mid-transaction.
    const std::optional<ToolkitSet> host_state =
        set ? std::nullopt : std::optional<ToolkitSet>(host_toolkit_state(ctx));
    // The "packages" facts: the bundle's set, else the host's state alone.
    const ToolkitSet& known = set ? *set : *host_state;
    if (host_state && !host_state->unfinished.empty()) {
      // Nothing to install them again from: the host's package manager
      // finishes them, or a rerun with the bundle does.
      Check c = blocked(
          "toolkit.unfinished",
          "a dpkg transaction stopped half-way and left " +
              host_state->unfinished_text() +
              ", so the NVIDIA container toolkit is not installed even "
              "where its runtime's file is on disk",
          "finish them with the host's package manager (sudo dpkg "
          "--configure -a; sudo dpkg --audit shows what is left), or rerun "
          "with the bundle (--bundle PATH), which installs them again");
      c.facts = search_facts(search);
      c.facts["packages"] = known.facts();
      return c;
    }
    // The package manager did not answer: that blocks only an install; a
    // runtime in place is judged without it, with a warning.
    if (carried && set->query_error && !path) {
      const Error& e = *set->query_error;
      Check c = blocked("toolkit.packages", e.message, e.fix, e.exit);
      c.facts = search_facts(search);
      c.facts["packages"] = set->facts();
      return c;
    }
    if (carried && !set->unfinished.empty()) {
      // An earlier transaction stopped half-way (dpkg killed, a power cut):
      // the runtime's file may well be in place, but the packages are not
      // installed, and stay so until a package manager finishes them. Only
      // dpkg has such states: rpm keeps its database consistent.
      const std::string what = "a dpkg transaction stopped half-way and left " +
                               set->unfinished_text();
      Check c =
          set->unfinished_at_set_version() || ctx.opts.upgrade_toolkit
              ? needed("toolkit.unfinished",
                       what + " (dpkg --audit lists them)",
                       "install " + names_text() + " " + set->version +
                           " from the bundle again, which finishes them")
              : blocked("toolkit.unfinished", what,
                        "finish them with the host's package manager (sudo "
                        "dpkg --configure -a; sudo dpkg --audit shows what is "
                        "left), or rerun with --upgrade-toolkit to install "
                        "the bundle's " +
                            set->version + " over them");
      c.facts = search_facts(search);
      c.facts["packages"] = set->facts();
      return c;
    }
    if (carried && (path ? set->other_version() && ctx.opts.upgrade_toolkit
                         : !set->current())) {
      if (!set->other_version() || ctx.opts.upgrade_toolkit)
        return install_check(*set, set->other_version(), search);
      // No runtime and another version's packages: a half-removed or
      // broken install the operator made; gpunode changes its version only
      // when asked.
      Check c =
          blocked("toolkit.other-version",
                  "nvidia-container-runtime is not where k3s looks for "
                  "it (" +
                      search_path_text() + "), and " + other_version_text(*set),
                  "sudo gpunode install --bundle " +
                      ctx.opts.bundle.value_or("DIR") + " --upgrade-toolkit");
      c.facts = search_facts(search);
      c.facts["packages"] = set->facts();
      return c;
    }

    if (!path) {
      const std::string from =
          !set ? std::string(
                     "install the NVIDIA container toolkit from the offline "
                     "package repository (sudo apt-get install "
                     "nvidia-container-toolkit)")
          : set->pm.family.empty()
              ? "neither dpkg nor rpm manages this host (" + set->pm.os_text() +
                    "), so gpunode cannot install the bundle's toolkit "
                    "packages (the bundle carries " +
                    set->carried + "); install the NVIDIA container toolkit"
          : set->current()
              ? "the toolkit packages " + set->version +
                    " are installed, but not their runtime: reinstall them (" +
                    set->pm.family + ")"
              : "the bundle carries " + set->carried + " only, not " +
                    set->pm.family + " " +
                    (set->arch.empty() ? set->machine : set->arch) + " (" +
                    set->pm.os_text() +
                    "): make the bundle with this host's packages (gpunode "
                    "bundle create --toolkit-packages DIR) or install the "
                    "NVIDIA container toolkit";
      Check c = blocked(
          "toolkit.missing",
          "nvidia-container-runtime is not installed where k3s looks for it (" +
              search_path_text() + ")",
          from + ", then " + restart +
              ": k3s looks for the runtime only when it starts (or rerun "
              "gpunode with --restart-k3s)");
      c.facts = search_facts(search);
      c.facts["packages"] = known.facts();
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
    c.facts["packages"] = known.facts();
    if (carried && set->current())
      c.details.push_back("the toolkit packages are the bundle's (" +
                          set_words(*set) + ")");
    else if (carried && set->other_version())
      c.warnings.push_back(other_version_text(*set));
    else if (carried && set->query_error)
      c.warnings.push_back(
          "cannot tell whether the toolkit packages are the "
          "bundle's (" +
          set_words(*set) + "): " + set->query_error->message);
    else if (host_state && host_state->query_error)
      c.warnings.push_back(
          "cannot tell whether a package transaction left the toolkit "
          "packages half-way: " +
          host_state->query_error->message);
    for (const auto& f : search.found)
      c.details.push_back(f.handler + " -> " + f.path);
    if (shadowed) {
      // Field failure 7: a GPU operator that was removed leaves its toolkit
      // copy behind, and k3s keeps preferring it over the distribution package.
      const std::string others = join(
          {search.nvidia_locations.begin() + 1, search.nvidia_locations.end()});
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

  Result<void> apply(Context& ctx, const Check&) override {
    auto found_set = find_toolkit_set(ctx);
    if (!found_set) return found_set.error();
    if (!*found_set || !(*found_set)->complete()) {
      return Error{ExitCode::kBlocked, "toolkit",
                   "the bundle's toolkit packages for this host are gone since "
                   "the check",
                   "run install again"};
    }
    const ToolkitSet& set = **found_set;
    if (set.query_error) return *set.query_error;
    // The package manager reads private copies, each held to bundle.toml's
    // hash as it was copied (stages/package_copies.hpp), never the stick.
    std::vector<PackageToCopy> wanted;
    for (const std::size_t i : set.to_install())
      wanted.push_back(
          {set.paths[i], set.entries[i].file, set.entries[i].sha256});
    auto copies =
        PackageCopies::make(ctx.host.fs().resolve(ctx.opts.state_dir), wanted);
    if (!copies) return copies.error();
    const auto& files = copies->paths();
    // With --upgrade-toolkit the operator asked for the bundle's version,
    // older or newer; rpm -U refuses an older one without --oldpackage
    // (rpm(8)), dpkg -i installs it with a warning (dpkg(1)).
    const auto argv =
        install_argv(set.pm, ctx.opts.root, files, ctx.opts.upgrade_toolkit);
    auto ran = run_package_transaction(ctx, set.pm, argv);
    if (!ran) return ran.error();
    const ProcessResult& r = *ran;
    if (r.outlasted_interrupt || r.outlasted_patience) {
      // gpunode waited for the transaction instead of cutting it; now it
      // stops, and says how the transaction really ended.
      const std::string why =
          r.outlasted_interrupt ? "interrupted by " + signal_name(interrupted())
                                : std::string("the --timeout ran out");
      return Error{
          r.outlasted_interrupt ? ExitCode::kInterrupted : ExitCode::kTimeout,
          "toolkit",
          why + " while " + argv[0] + " installed the toolkit packages " +
              set.version + "; gpunode waited for " + argv[0] +
              " to finish its transaction rather than cut it: " +
              outcome_text(ctx, set, argv[0], r),
          r.outlasted_interrupt
              ? "run the same command again: it checks every layer and "
                "goes on from here"
              : "rerun with a longer --timeout: it checks every layer and "
                "goes on from here"};
    }
    if (!r.succeeded()) {
      const std::string said = last_lines(r);
      return Error{
          r.timed_out ? ExitCode::kTimeout : ExitCode::kBlocked, "toolkit",
          argv[0] + " could not install the toolkit packages " + set.version +
              ": " + describe_failure(r) +
              (said.empty() ? "" : "; it said: " + said),
          // rpm -U checks the whole transaction's dependencies
          // before it changes anything (rpm(8)); dpkg -i unpacks
          // package by package and leaves those whose
          // dependencies fail unconfigured (dpkg(1), --audit).
          says_locked(r) ? "another package manager took " + argv[0] +
                               "'s lock as the transaction started, and still "
                               "holds it: let it finish, then run install "
                               "again; never remove the lock file"
          : set.pm.family == "rpm"
              ? std::string("rpm changed nothing; fix what it names "
                            "(a dependency this host lacks, a "
                            "conflicting package), then run install "
                            "again")
              : std::string("dpkg may have left packages unpacked "
                            "but not configured (sudo dpkg --audit); "
                            "fix what it names (a dependency this "
                            "host lacks, a conflicting package), "
                            "then run install again")};
    }
    const RuntimeSearch search = find_nvidia_runtimes(ctx.host.fs());
    if (!search.nvidia_path()) {
      return Error{
          ExitCode::kBlocked, "toolkit",
          argv[0] + " installed the toolkit packages " + set.version +
              ", but nvidia-container-runtime is still not where k3s "
              "looks for it (" +
              search_path_text() + ")",
          "check where the packages put it (" +
              std::string(set.pm.family == "deb"
                              ? "dpkg -L nvidia-container-toolkit-base"
                              : "rpm -ql nvidia-container-toolkit-base") +
              ")"};
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<Stage> make_toolkit_stage() {
  return std::make_unique<ToolkitStage>();
}

}  // namespace gpunode
