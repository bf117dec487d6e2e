// handler: does k3s's containerd know the `nvidia` runtime, and is it set up
// the way GPU pods need? Reads the config k3s rendered at its last start.
// The one change it can make (only with --restart-k3s) is restarting k3s, so
// that it looks for the NVIDIA runtimes again and re-renders config.toml:
// k3s detects runtimes only at start-up (FACTS.md, field failure 2).
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "containerd/containerd_config.hpp"
#include "containerd/runtime_search.hpp"
#include "gpunode/digest.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

// SystemdCgroup must match the cgroup driver k3s runs containers with,
// which the runc runtime in the same file shows; k3s renders both from one
// value (true only where systemd runs the node). Without a runc entry,
// assume systemd (the k3s default on systemd).
bool systemd_cgroup_wanted(const ContainerdConfig& config) {
  const ContainerdRuntime* runc = config.runtime("runc");
  return runc && runc->systemd_cgroup ? *runc->systemd_cgroup : true;
}

using std::chrono::milliseconds;

constexpr std::string_view kRuncV2 = "io.containerd.runc.v2";
constexpr milliseconds kRestartTimeout = std::chrono::minutes(2);
constexpr milliseconds kPollInterval{250};
// k3s renders config.toml once per start. A re-rendered file that parses but
// lacks the runtime and stays the same this long is its final word, not a
// write caught half-way.
constexpr milliseconds kSettle = std::chrono::seconds(5);
constexpr std::size_t kMaxTemplateBytes = 1 << 20;

std::string config_dir() { return std::string(kContainerdConfigDir); }
std::string config_path() { return std::string(kContainerdConfigPath); }

// The user's inputs to k3s's rendering. They outlive every restart, unlike
// config.toml, so every lasting fix has to land in one of them.
struct Overrides {
  std::optional<std::string> template_path;
  // The template starts from k3s's own ({{ template "base" . }}), so k3s
  // still adds the runtimes it finds. Without it the template is rendered as
  // written and a restart cannot add or repair the nvidia runtime.
  bool template_uses_base = false;
  std::vector<std::string> dropins;

  bool static_template() const { return template_path && !template_uses_base; }
};

bool mentions_base_template(const std::string& text) {
  // {{ template "base" . }}, with any spacing or trim markers.
  for (std::size_t at = text.find("template"); at != std::string::npos;
       at = text.find("template", at + 1)) {
    std::size_t i = at + 8;
    if (i >= text.size() || (text[i] != ' ' && text[i] != '\t')) continue;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    if (text.compare(i, 6, "\"base\"") == 0) return true;
  }
  return false;
}

Overrides find_overrides(const FileSystem& fs) {
  Overrides ov;
  // k3s checks config-v3.toml.tmpl first, then config.toml.tmpl.
  for (const char* name : {"/config-v3.toml.tmpl", "/config.toml.tmpl"}) {
    const std::string path = config_dir() + name;
    if (!fs.stat(path)) continue;
    ov.template_path = path;
    auto text = fs.read_file(path, kMaxTemplateBytes);
    // Unreadable: assume the worst, that a restart would not help.
    ov.template_uses_base = text && mentions_base_template(*text);
    break;
  }
  for (const char* name : {"/config-v3.toml.d", "/config.toml.d"}) {
    const std::string dir = config_dir() + name;
    for (const auto& entry : fs.list_dir(dir)) {
      if (entry.size() > 5 &&
          entry.compare(entry.size() - 5, 5, ".toml") == 0) {
        ov.dropins.push_back(dir + "/" + entry);
      }
    }
  }
  return ov;
}

struct Env {
  RuntimeSearch search;
  std::optional<std::string> unit;
  Overrides ov;
  // Of the parsed config.toml; 0 until it is known. k3s releases that render
  // version 2 know only config.toml.tmpl.
  int config_version = 0;
  // What the parsed config.toml says of the nvidia runtime (facts).
  nlohmann::json rendered = nlohmann::json::object();

  std::string unit_name() const { return unit ? *unit : "k3s"; }
  // "sudo systemctl restart k3s", hedged when no unit file was found.
  std::string systemctl(const std::string& verb) const {
    return "sudo systemctl " + verb + " " +
           (unit ? *unit : std::string("k3s (or k3s-agent on an agent node)"));
  }
  std::string template_or_default() const {
    if (ov.template_path) return *ov.template_path;
    return config_dir() +
           (config_version == 2 ? "/config.toml.tmpl" : "/config-v3.toml.tmpl");
  }
};

// One thing wrong with the rendered nvidia runtime.
struct Problem {
  std::string code;
  std::string summary;
  std::string fix;  // when a restart is not the fix, or alongside it
  bool restart_fixes = false;
};

std::string restart_fix(const Env& env) {
  return env.systemctl("restart") + ", or rerun gpunode with --restart-k3s";
}

// A problem a restart cleans up becomes kNeeded under --restart-k3s.
Check decide(const Context& ctx, const Env& env, const Problem& p,
             const std::string& action) {
  if (p.restart_fixes && ctx.opts.restart_k3s && env.unit) {
    return needed(p.code, p.summary, action);
  }
  Check c = blocked(p.code, p.summary, p.fix);
  if (p.restart_fixes && ctx.opts.restart_k3s && !env.unit) {
    c.details.push_back(
        "--restart-k3s was given, but no k3s.service or k3s-agent.service unit "
        "exists, so gpunode cannot restart k3s; restart it the way it is run "
        "on this host");
  }
  return c;
}

std::string hand_edit_note(const Env& env) {
  return "config.toml is rewritten by k3s on every start, so edits made there "
         "are lost; lasting changes belong in " +
         env.template_or_default();
}

// The handler stage's facts (docs/json-events.md): where the config comes
// from, whatever the verdict, and what it says once it parsed.
nlohmann::json handler_facts(const Env& env) {
  nlohmann::json facts{
      {"handler", "nvidia"},
      {"config_path", config_path()},
      {"template_override", env.ov.template_path
                                ? nlohmann::json(*env.ov.template_path)
                                : nlohmann::json(nullptr)},
      {"dropins", env.ov.dropins},
      {"k3s_unit",
       env.unit ? nlohmann::json(*env.unit) : nlohmann::json(nullptr)}};
  facts.update(env.rendered);
  return facts;
}

// Facts that hold whatever the verdict: the operator must know where the
// config really comes from before touching it.
void add_context(Check& c, const Env& env) {
  c.facts.update(handler_facts(env));
  if (env.ov.template_path) {
    if (env.ov.static_template()) {
      c.warnings.push_back(
          "config.toml is rendered from the template override " +
          *env.ov.template_path +
          ", which does not include {{ template \"base\" . }}: k3s renders "
          "it "
          "as written, so it never adds or updates the NVIDIA runtimes by "
          "itself; "
          "the nvidia runtime must be kept in the template by hand");
    } else {
      c.details.push_back(
          "config.toml is rendered from the template override " +
          *env.ov.template_path + " (on top of k3s's base template)");
    }
  }
  if (!env.ov.dropins.empty()) {
    std::string list;
    for (const auto& d : env.ov.dropins) list += (list.empty() ? "" : ", ") + d;
    c.warnings.push_back("containerd drop-in files " + list +
                         " are merged over config.toml; gpunode checked "
                         "config.toml only, so a runtime setting changed in a "
                         "drop-in is not reflected here");
  }
  c.details.push_back(hand_edit_note(env));
}

std::vector<Problem> runtime_problems(const Context& ctx, const Env& env,
                                      const ContainerdConfig& config,
                                      const ContainerdRuntime& rt) {
  std::vector<Problem> problems;
  const auto found = env.search.nvidia_path();
  const bool frozen_template = env.ov.static_template();
  const std::string header = config.runtime_options_header("nvidia");
  const std::string in_template = frozen_template
                                      ? " in " + *env.ov.template_path +
                                            ", then " + env.systemctl("restart")
                                      : std::string();

  if (rt.runtime_type.value_or("") != kRuncV2) {
    Problem p;
    p.code = "handler.runtime-type";
    p.summary =
        "containerd runtime nvidia has runtime_type " +
        (rt.runtime_type ? "\"" + *rt.runtime_type + "\""
                         : std::string("unset")) +
        ", but nvidia-container-runtime is a runc replacement driven by the "
        "\"io.containerd.runc.v2\" shim";
    p.restart_fixes = !frozen_template;
    p.fix = frozen_template
                ? "set runtime_type = \"io.containerd.runc.v2\" for the nvidia "
                  "runtime" +
                      in_template
                : "config.toml was changed by hand; " + restart_fix(env) +
                      " to render it again";
    problems.push_back(p);
  }

  if (!rt.binary_name) {
    Problem p;
    p.code = "handler.binary-missing";
    p.summary =
        "containerd runtime nvidia has no options.BinaryName, so containerd "
        "runs plain runc and containers get no GPU";
    p.restart_fixes = !frozen_template && found.has_value();
    p.fix = frozen_template
                ? "add BinaryName = \"" +
                      found.value_or("/usr/bin/nvidia-container-runtime") +
                      "\" under " + header + in_template
            : found ? "config.toml was changed by hand; " + restart_fix(env) +
                          " to render it again"
                    : "install the NVIDIA container toolkit (see the toolkit "
                      "layer), then " +
                          restart_fix(env);
    problems.push_back(p);
  } else {
    const auto resolved = lookup_runtime_binary(ctx.host.fs(), *rt.binary_name);
    if (!resolved || !ctx.host.fs().is_executable_file(*resolved)) {
      Problem p;
      p.code = "handler.binary-stale";
      p.summary =
          "containerd runtime nvidia points at " + *rt.binary_name +
          ", which does not exist or is not executable: GPU pods fail to start";
      if (found) {
        p.summary += "; nvidia-container-runtime is now at " + *found;
      }
      p.restart_fixes = !frozen_template && found.has_value();
      if (!found) {
        p.fix =
            "the NVIDIA container toolkit is gone: install "
            "nvidia-container-toolkit "
            "from the offline package repository (the toolkit layer), then " +
            restart_fix(env);
      } else if (frozen_template) {
        p.fix =
            "set BinaryName = \"" + *found + "\" under " + header + in_template;
      } else {
        p.fix = restart_fix(env) +
                ": k3s looks for the runtime again at start-up and "
                "renders the handler with " +
                *found;
      }
      problems.push_back(p);
    }
  }

  const bool want = systemd_cgroup_wanted(config);
  if (rt.systemd_cgroup != want) {
    Problem p;
    p.code = "handler.systemd-cgroup";
    const std::string have =
        rt.systemd_cgroup ? (*rt.systemd_cgroup ? "SystemdCgroup = true"
                                                : "SystemdCgroup = false")
                          : "no options.SystemdCgroup";
    p.summary = "containerd runtime nvidia has " + have +
                ", but k3s runs containers with " +
                (want ? "the systemd cgroup driver (runc: SystemdCgroup = true)"
                      : "the cgroupfs driver (runc: SystemdCgroup = false)") +
                ": GPU pods get killed seconds after they start (k3s #7130)";
    p.restart_fixes = !env.ov.template_path;
    const std::string line =
        std::string("SystemdCgroup = ") + (want ? "true" : "false");
    if (env.ov.template_path) {
      p.fix = "add " + line + " under " + header + " in " +
              *env.ov.template_path +
              " (config.toml is rendered from it), then " +
              env.systemctl("restart");
    } else {
      p.fix = "config.toml was changed by hand; " + restart_fix(env) +
              " to render it again (and put lasting changes in " +
              env.template_or_default() + ", never in config.toml)";
    }
    problems.push_back(p);
  }
  return problems;
}

Check evaluate(Context& ctx, Env& env) {
  FileSystem& fs = ctx.host.fs();
  if (!fs.stat(config_path())) {
    return blocked(
        "handler.config-missing",
        "k3s has not rendered containerd's config (" + config_path() +
            " does not exist): k3s has not started on this host yet?",
        env.systemctl("start") +
            " (k3s renders the config when it starts; install the NVIDIA "
            "container toolkit first, since k3s looks for it only then)");
  }
  auto text = fs.read_file(config_path(), kMaxContainerdConfigBytes);
  if (!text && text.error().exit == ExitCode::kCannotRun) {
    return blocked(
        "handler.config-unreadable", text.error().message,
        "run gpunode as root (sudo): k3s writes config.toml readable "
        "by root only",
        ExitCode::kCannotRun);
  }
  if (!text) {  // a directory or a FIFO where the file belongs
    return blocked(
        "handler.config-unreadable", text.error().message,
        "remove it; " + env.systemctl("restart") + " renders config.toml again",
        ExitCode::kUsage);
  }
  auto config = parse_containerd_config(*text, config_path());
  if (!config) {
    // Malformed input is an exit-2 failure, whatever else is wrong.
    const std::string fix =
        env.ov.template_path
            ? "correct " + *env.ov.template_path +
                  " (config.toml is rendered from it), then " +
                  env.systemctl("restart")
            : "config.toml was damaged or edited by hand; " +
                  env.systemctl("restart") +
                  " to render it again, and put lasting changes in " +
                  env.template_or_default();
    return blocked("handler.config-invalid", config.error().message, fix,
                   ExitCode::kUsage);
  }

  env.config_version = config->version;
  const auto found = env.search.nvidia_path();
  const ContainerdRuntime* rt = config->runtime("nvidia");
  env.rendered["config_version"] = config->version;
  env.rendered["runtime_binary"] = rt && rt->binary_name
                                       ? nlohmann::json(*rt->binary_name)
                                       : nlohmann::json(nullptr);
  env.rendered["runtime_type"] = rt && rt->runtime_type
                                     ? nlohmann::json(*rt->runtime_type)
                                     : nlohmann::json(nullptr);
  env.rendered["systemd_cgroup"] = rt && rt->systemd_cgroup
                                       ? nlohmann::json(*rt->systemd_cgroup)
                                       : nlohmann::json(nullptr);
  Check c;
  if (rt == nullptr) {
    if (!found) {
      c = blocked(
          "handler.no-toolkit",
          "containerd has no runtime nvidia, and nvidia-container-runtime is "
          "not installed: the lower layer (nvidia-container-runtime) is broken",
          "fix the toolkit layer first: install nvidia-container-toolkit from "
          "the offline package repository, then " +
              restart_fix(env));
    } else if (env.ov.static_template()) {
      c = blocked(
          "handler.template-drops-runtime",
          "containerd has no runtime nvidia: config.toml is rendered from " +
              *env.ov.template_path +
              ", which replaces k3s's template and has no nvidia runtime, so "
              "restarting k3s will not add it",
          "start " + *env.ov.template_path +
              " with {{ template \"base\" . }} (k3s then adds the runtimes it "
              "finds), or add the nvidia runtime with BinaryName = \"" +
              *found + "\" and SystemdCgroup = " +
              (systemd_cgroup_wanted(*config) ? "true" : "false") +
              " (as runc has it) to it; then " + env.systemctl("restart"));
    } else {
      Problem p{"handler.runtime-missing",
                "containerd has no runtime nvidia although "
                "nvidia-container-runtime is "
                "at " +
                    *found +
                    ": k3s was started before the NVIDIA container "
                    "toolkit was installed (it detects runtimes only at "
                    "start-up), so pods "
                    "fail with: no runtime for \"nvidia\" is configured",
                restart_fix(env), true};
      c = decide(
          ctx, env, p,
          "restart " + env.unit_name() + " so it renders the nvidia runtime");
    }
  } else {
    const auto problems = runtime_problems(ctx, env, *config, *rt);
    if (problems.empty()) {
      c = satisfied("handler.ok",
                    "containerd config version " +
                        std::to_string(config->version) +
                        " has runtime nvidia -> " + *rt->binary_name +
                        " (io.containerd.runc.v2, SystemdCgroup = " +
                        (*rt->systemd_cgroup ? "true" : "false") + ")");
    } else {
      const bool all_restart =
          std::all_of(problems.begin(), problems.end(),
                      [](const Problem& p) { return p.restart_fixes; });
      Problem first = problems.front();
      first.restart_fixes = all_restart;
      c = decide(ctx, env, first,
                 "restart " + env.unit_name() +
                     " so it renders the nvidia runtime again");
      for (std::size_t i = 1; i < problems.size(); ++i) {
        c.details.push_back("also: " + problems[i].summary +
                            " (fix: " + problems[i].fix + ")");
      }
    }
    if (found && rt->binary_name && *found != *rt->binary_name &&
        ctx.host.fs().is_executable_file(*rt->binary_name)) {
      c.details.push_back("at its next start k3s will use " + *found +
                          " instead of " + *rt->binary_name);
    }
  }

  if (config->default_runtime_name) {
    std::string note =
        "default_runtime_name = \"" + *config->default_runtime_name +
        "\" (k3s --default-runtime): pods without a runtimeClassName run "
        "under it";
    if (*config->default_runtime_name == "nvidia" &&
        c.status != CheckStatus::kSatisfied) {
      note +=
          ", so until this is fixed every such pod on this node fails, not "
          "only GPU pods";
    }
    c.details.push_back(note);
  }
  for (const auto& f : env.search.found) {
    if (f.handler != "nvidia" && config->runtime(f.handler) == nullptr) {
      c.details.push_back(f.path + " exists but containerd has no runtime " +
                          f.handler + " yet; k3s adds it at its next start");
    }
  }
  return c;
}

// What the wait compares: the file k3s rewrites when it starts.
struct ConfigState {
  std::optional<FileInfo> info;
  std::optional<std::string> content;
  bool operator==(const ConfigState& o) const {
    const bool same_info =
        info.has_value() == o.info.has_value() &&
        (!info || (info->mtime == o.info->mtime && info->size == o.info->size));
    return same_info && content == o.content;
  }
};

ConfigState read_state(const FileSystem& fs) {
  ConfigState s;
  s.info = fs.stat(config_path());
  if (auto text = fs.read_file(config_path(), kMaxContainerdConfigBytes)) {
    s.content = std::move(*text);
  }
  return s;
}

class HandlerStage : public Stage {
 public:
  std::string_view name() const override { return "handler"; }
  std::string_view layer() const override {
    return "containerd runtime handler";
  }

  std::string inputs(Context& ctx) const override {
    const FileSystem& fs = ctx.host.fs();
    std::string text = "root=" + ctx.opts.root + "\n";
    text += std::string("restart_k3s=") +
            (ctx.opts.restart_k3s ? "true" : "false") + "\n";
    auto config = fs.read_file(config_path(), kMaxContainerdConfigBytes);
    text += "config_sha256=" +
            (config ? sha256_hex(*config) : std::string("none")) + "\n";
    // The toolkit's location and the template decide the outcome as much
    // as config.toml does.
    text += "nvidia_runtime=" +
            find_nvidia_runtimes(fs).nvidia_path().value_or("none") + "\n";
    const Overrides ov = find_overrides(fs);
    if (ov.template_path) {
      auto tmpl = fs.read_file(*ov.template_path, kMaxTemplateBytes);
      text += "template=" + *ov.template_path + ":" +
              (tmpl ? sha256_hex(*tmpl) : std::string("unreadable")) + "\n";
    }
    return text;
  }

  Check check(Context& ctx) override {
    const FileSystem& fs = ctx.host.fs();
    Env env{find_nvidia_runtimes(fs), find_k3s_unit(fs), find_overrides(fs)};
    Check c = evaluate(ctx, env);
    add_context(c, env);
    return c;
  }

  Result<void> apply(Context& ctx, const Check&) override {
    FileSystem& fs = ctx.host.fs();
    const auto unit = find_k3s_unit(fs);
    if (!unit) {
      return Error{
          ExitCode::kBlocked, "handler",
          "cannot restart k3s: no k3s.service or k3s-agent.service unit found",
          "restart k3s the way it is run on this host, then rerun gpunode"};
    }
    const ConfigState before = read_state(fs);
    const milliseconds left = ctx.time_left();
    if (left.count() <= 0) {
      return Error{ExitCode::kTimeout, "handler",
                   "no time left (--timeout) to restart " + *unit,
                   "sudo systemctl restart " + *unit +
                       ", or rerun with a longer --timeout"};
    }
    const ProcessResult r = ctx.host.proc().run(
        {"systemctl", "restart", *unit}, std::min(kRestartTimeout, left));
    if (!r.succeeded()) {
      const std::string logs =
          "see why: sudo journalctl -u " + *unit + " -n 100";
      if (r.timed_out) {
        return Error{ExitCode::kTimeout, "handler",
                     "systemctl restart " + *unit + " did not finish in time",
                     logs};
      }
      return Error{ExitCode::kBlocked, "handler",
                   "systemctl restart " + *unit + " failed (" +
                       describe_failure(r) + ")",
                   logs};
    }
    return wait_for_render(ctx, *unit, before);
  }

 private:
  // systemctl may return before k3s has written the new config.toml (and a
  // write may be caught half-way), so poll until it has changed and holds
  // the runtime, within the run's deadline.
  static Result<void> wait_for_render(Context& ctx, const std::string& unit,
                                      const ConfigState& before) {
    FileSystem& fs = ctx.host.fs();
    Clock& clock = ctx.host.clock();
    std::string last_problem;
    std::optional<ConfigState> settling;
    std::chrono::steady_clock::time_point settling_since;
    for (;;) {
      const ConfigState now = read_state(fs);
      if (now.content && !(now == before)) {
        auto config = parse_containerd_config(*now.content, config_path());
        if (config && config->runtime("nvidia") != nullptr) return {};
        if (!config) {
          last_problem = config.error().message;
          settling.reset();
        } else if (!settling || !(*settling == now)) {
          settling = now;
          settling_since = clock.steady_now();
        } else if (clock.steady_now() - settling_since >= kSettle) {
          const Overrides ov = find_overrides(fs);
          return Error{
              ExitCode::kBlocked, "handler",
              unit + " restarted and rendered " + config_path() +
                  " again, still without the nvidia runtime",
              ov.static_template()
                  ? "add the nvidia runtime to " + *ov.template_path +
                        " or start it with {{ template \"base\" . }}"
                  : "check that nvidia-container-runtime is executable in a "
                    "directory k3s searches (gpunode --only toolkit), and "
                    "sudo journalctl -u " +
                        unit};
        } else {
          last_problem = "config.toml was rendered without the nvidia runtime";
        }
      }
      const milliseconds left = ctx.time_left();
      if (left.count() <= 0) {
        return Error{
            ExitCode::kTimeout, "handler",
            unit + " restarted, but " + config_path() +
                " was not re-rendered with the nvidia runtime before the "
                "deadline" +
                (last_problem.empty() ? "" : " (" + last_problem + ")"),
            "see sudo journalctl -u " + unit +
                " -n 100; rerun gpunode (with a "
                "longer --timeout) once k3s is up"};
      }
      clock.sleep_for(std::min(kPollInterval, left));
    }
  }
};

}  // namespace

std::unique_ptr<Stage> make_handler_stage() {
  return std::make_unique<HandlerStage>();
}

}  // namespace gpunode
