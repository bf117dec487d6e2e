// The handler stage over the simulated host trees of test/sim/host-tree.sh:
// one stable code per failure, fixes that name the right unit and file,
// checks that touch nothing, and --restart-k3s through the simulated
// systemctl, which re-renders config.toml the way k3s does at start-up.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "containerd/containerd_config.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/stage.hpp"
#include "gpunode/system_host.hpp"
#include "host_bed.hpp"
#include "scripted_runner.hpp"
#include "stages/stages.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

using test::any_contains;

using std::chrono::milliseconds;

const std::string kConfig(kContainerdConfigPath);
const std::string kConfigDir(kContainerdConfigDir);

// Stands in for systemctl where the simulated one cannot show a case: the
// tests' one fake runner, answering every argv with exit 0 and recording it,
// under the member names these cases read.
class FakeRunner : public test::ScriptedRunner {
 public:
  FakeRunner() : ScriptedRunner(exited_zero()) {
    locate = [](const std::string& program) {
      return std::optional<std::string>(program);
    };
  }
  FakeRunner(const FakeRunner&) = delete;
  FakeRunner& operator=(const FakeRunner&) = delete;

  const std::vector<std::vector<std::string>>& calls = argvs();
  const std::vector<milliseconds>& timeouts = ScriptedRunner::timeouts();

 private:
  static ProcessResult exited_zero() {
    ProcessResult r;
    r.exit_code = 0;
    return r;
  }
};

// Built before the bed, so that the bed's host can run programs through it.
struct FakeRunnerMember {
  FakeRunner fake;
};

// A host tree under a temporary root (the one host bed), the real process
// runner with test/sim/bin first on PATH (or a FakeRunner), and a clock
// that only moves when slept on.
struct SimHost : FakeRunnerMember, test::HostBed {
  explicit SimHost(const std::string& scenario, bool fake_runner = false)
      : HostBed(scenario, fake_runner ? &fake : nullptr) {
    use_sim_programs();
    env.set("GPUNODE_SIM_SYSTEMCTL_LOG", tmp.path() + "/systemctl.log");
    env.set("GPUNODE_SIM_K3S_RENDER_DELAY", "0");
    env.unset("GPUNODE_SIM_K3S_START");
  }

  // check() must never change the host: compare snapshots around it.
  Check check() { return check_untouched(*stage); }

  Result<void> apply(milliseconds time_left = std::chrono::minutes(10)) {
    Context ctx = context(time_left);
    return stage->apply(ctx, Check{});
  }

  std::string systemctl_log() const {
    const std::string log = tmp.path() + "/systemctl.log";
    return ::access(log.c_str(), F_OK) == 0 ? test::read_text(log) : "";
  }

  void write(const std::string& host_path, const std::string& text,
             unsigned mode = 0644) {
    test::write_text(root + host_path, text, mode);
  }
  std::string read(const std::string& host_path) const {
    return test::read_text(root + host_path);
  }
  void remove(const std::string& host_path) {
    ::unlink((root + host_path).c_str());
  }
  // Rewrites the rendered config, replacing one piece of text.
  void edit_config(const std::string& from, const std::string& to) {
    std::string text = read(kConfig);
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    write(kConfig, text);
  }

  std::unique_ptr<Stage> stage = make_handler_stage();
};

std::string all_text(const Check& c) {
  std::string text = c.summary + "\n" + c.fix + "\n" + c.action + "\n";
  for (const auto& d : c.details) text += d + "\n";
  for (const auto& w : c.warnings) text += w + "\n";
  return text;
}

TEST_CASE("the handler stage is named for its layer", "[handler]") {
  auto stage = make_handler_stage();
  REQUIRE(stage != nullptr);
  CHECK(stage->name() == "handler");
  CHECK(stage->layer() == "containerd runtime handler");
}

TEST_CASE(
    "every host-tree scenario gets its own code and status, and checks change "
    "nothing",
    "[handler]") {
  struct Case {
    const char* scenario;
    CheckStatus status;
    const char* code;
    ExitCode exit;
  };
  const std::vector<Case> cases = {
      {"good-v3", CheckStatus::kSatisfied, "handler.ok", ExitCode::kOk},
      {"good-v2", CheckStatus::kSatisfied, "handler.ok", ExitCode::kOk},
      {"agent", CheckStatus::kSatisfied, "handler.ok", ExitCode::kOk},
      {"toolkit-dir", CheckStatus::kSatisfied, "handler.ok", ExitCode::kOk},
      {"toolkit-shadow", CheckStatus::kSatisfied, "handler.ok", ExitCode::kOk},
      {"template-override", CheckStatus::kSatisfied, "handler.ok",
       ExitCode::kOk},
      {"toolkit-after-k3s", CheckStatus::kBlocked, "handler.runtime-missing",
       ExitCode::kBlocked},
      {"no-toolkit", CheckStatus::kBlocked, "handler.no-toolkit",
       ExitCode::kBlocked},
      {"stale-handler", CheckStatus::kBlocked, "handler.binary-stale",
       ExitCode::kBlocked},
      {"no-systemd-cgroup", CheckStatus::kBlocked, "handler.systemd-cgroup",
       ExitCode::kBlocked},
      {"malformed-config", CheckStatus::kBlocked, "handler.config-invalid",
       ExitCode::kUsage},
      {"no-config", CheckStatus::kBlocked, "handler.config-missing",
       ExitCode::kBlocked},
  };
  for (const auto& k : cases) {
    SimHost sim(k.scenario);
    Check c = sim.check();
    INFO(k.scenario << ": " << all_text(c));
    CHECK(c.code == k.code);
    CHECK(c.status == k.status);
    CHECK(c.exit == k.exit);
    if (c.status == CheckStatus::kBlocked) CHECK_FALSE(c.fix.empty());
    CHECK(sim.unchanged);
    CHECK(sim.systemctl_log().empty());
    // Field failure 3: every verdict reminds where lasting changes go.
    CHECK(any_contains(c.details, "rewritten by k3s on every start"));
  }
}

TEST_CASE(
    "a good v3 node is satisfied, naming the config version and the binary",
    "[handler]") {
  SimHost sim("good-v3");
  Check c = sim.check();
  CHECK(c.summary ==
        "containerd config version 3 has runtime nvidia -> "
        "/usr/bin/nvidia-container-runtime "
        "(io.containerd.runc.v2, SystemdCgroup = true)");
  CHECK(c.warnings.empty());
  CHECK(
      any_contains(c.details, "config-v3.toml.tmpl"));  // where changes belong
}

TEST_CASE("a good v2 node (k3s v1.30) is satisfied", "[handler]") {
  SimHost sim("good-v2");
  Check c = sim.check();
  CHECK_THAT(c.summary, Catch::StartsWith(
                            "containerd config version 2 has runtime nvidia -> "
                            "/usr/bin/nvidia-container-runtime"));
  // k3s releases that render version 2 read only config.toml.tmpl.
  CHECK(any_contains(c.details, "lasting changes belong in " + kConfigDir +
                                    "/config.toml.tmpl"));
}

TEST_CASE(
    "the toolkit-dir node is satisfied and its default runtime is mentioned",
    "[handler]") {
  SimHost sim("toolkit-dir");
  Check c = sim.check();
  CHECK_THAT(
      c.summary,
      Catch::Contains("/usr/local/nvidia/toolkit/nvidia-container-runtime"));
  CHECK(any_contains(c.details, "default_runtime_name = \"nvidia\""));
  CHECK_FALSE(any_contains(c.details, "every such pod on this node fails"));
}

TEST_CASE(
    "toolkit installed after k3s started: blocked, restart k3s (field failure "
    "2)",
    "[handler]") {
  SimHost sim("toolkit-after-k3s");
  Check c = sim.check();
  CHECK(c.code == "handler.runtime-missing");
  CHECK_THAT(
      c.summary,
      Catch::Contains("k3s was started before the NVIDIA container toolkit"));
  CHECK_THAT(c.summary, Catch::Contains("only at start-up"));
  CHECK_THAT(c.summary,
             Catch::Contains("no runtime for \"nvidia\" is configured"));
  CHECK_THAT(c.fix, Catch::StartsWith("sudo systemctl restart k3s,"));
  CHECK_THAT(c.fix, Catch::Contains("--restart-k3s"));
  CHECK(any_contains(
      c.details,
      "/usr/bin/nvidia-container-runtime.cdi exists but containerd "
      "has no runtime nvidia-cdi"));
}

TEST_CASE("with --restart-k3s a missing runtime is needed: restart k3s",
          "[handler]") {
  SimHost sim("toolkit-after-k3s");
  sim.opts.restart_k3s = true;
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "handler.runtime-missing");
  CHECK(c.action == "restart k3s so it renders the nvidia runtime");
  CHECK(sim.unchanged);
  CHECK(sim.systemctl_log().empty());
}

TEST_CASE("on an agent node every fix and action names k3s-agent",
          "[handler]") {
  SECTION("runtime missing") {
    SimHost sim("agent");
    sim.write(kConfig,
              test::read_text(test::fixture("containerd/v3-no-nvidia.toml")));
    Check c = sim.check();
    CHECK(c.code == "handler.runtime-missing");
    CHECK_THAT(c.fix, Catch::StartsWith("sudo systemctl restart k3s-agent,"));
    sim.opts.restart_k3s = true;
    CHECK(sim.check().action ==
          "restart k3s-agent so it renders the nvidia runtime");
  }
  SECTION("config never rendered") {
    SimHost sim("agent");
    sim.remove(kConfig);
    Check c = sim.check();
    CHECK(c.code == "handler.config-missing");
    CHECK_THAT(c.fix, Catch::StartsWith("sudo systemctl start k3s-agent"));
  }
}

TEST_CASE("no runtime and no toolkit points at the lower layer", "[handler]") {
  SimHost sim("no-toolkit");
  sim.opts.restart_k3s = true;  // a restart cannot help here
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "handler.no-toolkit");
  CHECK_THAT(c.summary,
             Catch::Contains("lower layer (nvidia-container-runtime)"));
  CHECK_THAT(c.fix, Catch::Contains("toolkit layer first"));
  CHECK_THAT(c.fix, Catch::Contains("nvidia-container-toolkit"));
}

TEST_CASE(
    "a handler pointing at a removed binary is stale, a restart finds the new "
    "one",
    "[handler]") {
  SimHost sim("stale-handler");
  Check c = sim.check();
  CHECK(c.code == "handler.binary-stale");
  CHECK_THAT(c.summary,
             Catch::Contains("points at /usr/bin/nvidia-container-runtime"));
  CHECK_THAT(c.summary,
             Catch::Contains(
                 "now at /usr/local/nvidia/toolkit/nvidia-container-runtime"));
  CHECK_THAT(c.fix, Catch::StartsWith("sudo systemctl restart k3s,"));
  sim.opts.restart_k3s = true;
  Check n = sim.check();
  CHECK(n.status == CheckStatus::kNeeded);
  CHECK(n.code == "handler.binary-stale");
}

TEST_CASE("a stale handler with the toolkit gone blocks on the toolkit",
          "[handler]") {
  SimHost sim("stale-handler");
  sim.remove("/usr/local/nvidia/toolkit/nvidia-container-runtime");
  sim.opts.restart_k3s = true;
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "handler.binary-stale");
  CHECK_THAT(c.fix, Catch::Contains("install nvidia-container-toolkit"));
}

TEST_CASE(
    "a template without SystemdCgroup is blocked with the fix in that template",
    "[handler]") {
  SimHost sim("no-systemd-cgroup");
  sim.opts.restart_k3s =
      true;  // a restart alone renders the same template again
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "handler.systemd-cgroup");
  CHECK_THAT(c.summary, Catch::Contains("no options.SystemdCgroup"));
  CHECK_THAT(c.summary, Catch::Contains("killed"));
  CHECK_THAT(c.summary, Catch::Contains("#7130"));
  CHECK_THAT(c.fix, Catch::StartsWith(
                        "add SystemdCgroup = true under "
                        "[plugins.'io.containerd.cri.v1.runtime'.containerd."
                        "runtimes.'nvidia'.options] in " +
                        kConfigDir + "/config-v3.toml.tmpl"));
  CHECK_THAT(c.fix, Catch::Contains("sudo systemctl restart k3s"));
  CHECK(any_contains(c.warnings, kConfigDir + "/config-v3.toml.tmpl"));
  CHECK(any_contains(c.details, "rewritten by k3s on every start"));
}

TEST_CASE(
    "SystemdCgroup = false in a hand-edited config.toml is cured by a restart",
    "[handler]") {
  SimHost sim("good-v3");
  sim.edit_config(
      "BinaryName = \"/usr/bin/nvidia-container-runtime\"\n  SystemdCgroup = "
      "true",
      "BinaryName = \"/usr/bin/nvidia-container-runtime\"\n  SystemdCgroup = "
      "false");
  Check c = sim.check();
  CHECK(c.code == "handler.systemd-cgroup");
  CHECK_THAT(c.summary, Catch::Contains("SystemdCgroup = false"));
  CHECK_THAT(c.fix, Catch::Contains("sudo systemctl restart k3s"));
  CHECK_THAT(c.fix, Catch::Contains("never in config.toml"));
  sim.opts.restart_k3s = true;
  CHECK(sim.check().status == CheckStatus::kNeeded);
}

TEST_CASE(
    "SystemdCgroup = false is right when k3s runs with the cgroupfs driver",
    "[handler]") {
  SimHost sim("good-v3");
  std::string text = sim.read(kConfig);
  for (std::size_t at;
       (at = text.find("SystemdCgroup = true")) != std::string::npos;) {
    text.replace(at, 20, "SystemdCgroup = false");
  }
  sim.write(kConfig, text);
  Check c = sim.check();
  CHECK(c.code == "handler.ok");
  CHECK_THAT(c.summary, Catch::Contains("SystemdCgroup = false"));
}

TEST_CASE("a runtime type other than runc.v2 is its own failure", "[handler]") {
  SimHost sim("good-v3");
  sim.edit_config("'nvidia']\n  runtime_type = \"io.containerd.runc.v2\"",
                  "'nvidia']\n  runtime_type = \"io.containerd.runhcs.v1\"");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "handler.runtime-type");
  CHECK_THAT(c.summary, Catch::Contains("\"io.containerd.runhcs.v1\""));
}

TEST_CASE("a runtime without BinaryName runs plain runc", "[handler]") {
  SimHost sim("good-v3");
  sim.edit_config("  BinaryName = \"/usr/bin/nvidia-container-runtime\"\n", "");
  Check c = sim.check();
  CHECK(c.code == "handler.binary-missing");
  CHECK_THAT(c.summary, Catch::Contains("plain runc"));
}

TEST_CASE("several problems: the first is the verdict, the others are details",
          "[handler]") {
  SimHost sim("no-systemd-cgroup");
  sim.remove("/usr/bin/nvidia-container-runtime");
  sim.write("/usr/local/nvidia/toolkit/nvidia-container-runtime", "#!/bin/sh\n",
            0755);
  Check c = sim.check();
  CHECK(c.code == "handler.binary-stale");
  // The template is static: only editing it helps, so the fix says so.
  CHECK_THAT(c.fix,
             Catch::StartsWith(
                 "set BinaryName = "
                 "\"/usr/local/nvidia/toolkit/nvidia-container-runtime\""));
  CHECK(any_contains(
      c.details,
      "also: containerd runtime nvidia has no options.SystemdCgroup"));
}

TEST_CASE("a template that drops the runtime cannot be cured by a restart",
          "[handler]") {
  SimHost sim("no-systemd-cgroup");
  sim.write(kConfig,
            test::read_text(test::fixture("containerd/v3-no-nvidia.toml")));
  sim.write(kConfigDir + "/config-v3.toml.tmpl",
            test::read_text(test::fixture("containerd/v3-no-nvidia.toml")));
  sim.opts.restart_k3s = true;
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "handler.template-drops-runtime");
  CHECK_THAT(c.fix, Catch::Contains("{{ template \"base\" . }}"));
}

TEST_CASE("a template override and drop-ins are always mentioned",
          "[handler]") {
  SECTION("config-v3.toml.tmpl on top of the base template") {
    SimHost sim("template-override");
    Check c = sim.check();
    CHECK(c.code == "handler.ok");
    CHECK(any_contains(
        c.details, "template override " + kConfigDir + "/config-v3.toml.tmpl"));
    CHECK(c.warnings.empty());
  }
  SECTION("config.toml.tmpl when there is no v3 template") {
    SimHost sim("good-v3");
    sim.write(kConfigDir + "/config.toml.tmpl", "{{ template \"base\" . }}\n");
    Check c = sim.check();
    CHECK(any_contains(
        c.details, "template override " + kConfigDir + "/config.toml.tmpl"));
  }
  SECTION("config-v3.toml.tmpl is the one k3s uses when both exist") {
    SimHost sim("template-override");
    sim.write(kConfigDir + "/config.toml.tmpl", "{{ template \"base\" . }}\n");
    Check c = sim.check();
    CHECK(any_contains(c.details, "config-v3.toml.tmpl"));
    CHECK_FALSE(any_contains(c.details, "/config.toml.tmpl"));
  }
  SECTION("drop-in files") {
    SimHost sim("good-v3");
    sim.write(kConfigDir + "/config-v3.toml.d/10-gpu.toml", "version = 3\n");
    sim.write(kConfigDir + "/config-v3.toml.d/README", "not a drop-in\n");
    sim.write(kConfigDir + "/config.toml.d/20-old.toml", "version = 2\n");
    Check c = sim.check();
    CHECK(c.code == "handler.ok");
    REQUIRE(c.warnings.size() == 1);
    CHECK_THAT(c.warnings[0],
               Catch::Contains(kConfigDir + "/config-v3.toml.d/10-gpu.toml, " +
                               kConfigDir + "/config.toml.d/20-old.toml"));
    CHECK_THAT(c.warnings[0], Catch::Contains("drop-in"));
    CHECK_FALSE(any_contains(c.warnings, "README"));
  }
  SECTION("an empty drop-in directory is not mentioned") {
    SimHost sim("good-v3");
    sim.write(kConfigDir + "/config-v3.toml.d/notes.txt", "x\n");
    CHECK(sim.check().warnings.empty());
  }
}

TEST_CASE("a malformed config.toml is exit 2 naming the file and line",
          "[handler]") {
  SimHost sim("malformed-config");
  const std::string good =
      test::read_text(test::fixture("containerd/v3-nvidia.toml"));
  const auto line = std::count(good.begin(), good.end(), '\n') + 2;
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.exit == ExitCode::kUsage);
  CHECK(c.code == "handler.config-invalid");
  CHECK_THAT(c.summary,
             Catch::StartsWith(kConfig + ":" + std::to_string(line) + ": "));
  CHECK_THAT(c.fix, Catch::Contains("sudo systemctl restart k3s"));
}

TEST_CASE("an unknown config version is exit 2 as well", "[handler]") {
  SimHost sim("good-v3");
  sim.edit_config("version = 3", "version = 4");
  Check c = sim.check();
  CHECK(c.code == "handler.config-invalid");
  CHECK(c.exit == ExitCode::kUsage);
  CHECK_THAT(c.summary,
             Catch::Contains("unsupported containerd config version 4"));
}

TEST_CASE("no rendered config: k3s has not started, start the unit",
          "[handler]") {
  SimHost sim("no-config");
  Check c = sim.check();
  CHECK(c.code == "handler.config-missing");
  CHECK_THAT(c.summary,
             Catch::Contains("k3s has not rendered containerd's config"));
  CHECK_THAT(c.fix, Catch::StartsWith("sudo systemctl start k3s "));
}

TEST_CASE("a default runtime of nvidia makes a broken handler break every pod",
          "[handler]") {
  SimHost sim("toolkit-dir");
  sim.remove("/usr/local/nvidia/toolkit/nvidia-container-runtime");
  Check c = sim.check();
  CHECK(c.code == "handler.binary-stale");
  CHECK(any_contains(c.details,
                     "every such pod on this node fails, not only GPU pods"));
}

TEST_CASE(
    "the handler inputs hold the root, the restart flag and the config's "
    "digest",
    "[handler]") {
  SimHost sim("good-v3");
  Context ctx = sim.context();
  const std::string inputs = sim.stage->inputs(ctx);
  CHECK_THAT(inputs, Catch::Contains("root=" + sim.root + "\n"));
  CHECK_THAT(inputs, Catch::Contains("restart_k3s=false\n"));
  CHECK_THAT(
      inputs,
      Catch::Contains("config_sha256=" + sha256_hex(sim.read(kConfig)) + "\n"));
  sim.opts.restart_k3s = true;
  CHECK_THAT(sim.stage->inputs(ctx), Catch::Contains("restart_k3s=true\n"));
  sim.edit_config("version = 3", "version = 3 ");
  CHECK_THAT(
      sim.stage->inputs(ctx),
      Catch::Contains("config_sha256=" + sha256_hex(sim.read(kConfig)) + "\n"));
}

TEST_CASE(
    "a --restart-k3s run restarts k3s, waits for the new config, and is then "
    "satisfied",
    "[handler]") {
  SimHost sim("toolkit-after-k3s");
  sim.env.set("GPUNODE_SIM_K3S_RENDER_DELAY", "0.2");
  sim.opts.restart_k3s = true;
  REQUIRE(sim.check().status == CheckStatus::kNeeded);
  auto r = sim.apply();
  INFO((r.ok() ? "" : r.error().message));
  REQUIRE(r.ok());
  CHECK(sim.systemctl_log() == "restart k3s\n");
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.code == "handler.ok");
}

TEST_CASE(
    "with --restart-k3s, gpunode repairs a stale handler with the runtime's "
    "new path",
    "[handler]") {
  SimHost sim("stale-handler");
  sim.opts.restart_k3s = true;
  REQUIRE(sim.check().status == CheckStatus::kNeeded);
  REQUIRE(sim.apply().ok());
  Check c = sim.check();
  CHECK(c.code == "handler.ok");
  CHECK_THAT(
      c.summary,
      Catch::Contains("/usr/local/nvidia/toolkit/nvidia-container-runtime"));
}

TEST_CASE("on an agent node the restart is of k3s-agent", "[handler]") {
  SimHost sim("agent");
  sim.write(kConfig,
            test::read_text(test::fixture("containerd/v3-no-nvidia.toml")));
  sim.opts.restart_k3s = true;
  REQUIRE(sim.apply().ok());
  CHECK(sim.systemctl_log() == "restart k3s-agent\n");
  CHECK(sim.check().code == "handler.ok");
}

TEST_CASE(
    "a restart that fails is an error naming the unit and systemctl's message",
    "[handler]") {
  SimHost sim("toolkit-after-k3s");
  sim.env.set("GPUNODE_SIM_K3S_START", "fail");
  sim.opts.restart_k3s = true;
  const auto before = test::snapshot_tree(sim.root);
  auto r = sim.apply();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().layer == "handler");
  CHECK(r.error().exit == ExitCode::kBlocked);
  CHECK_THAT(r.error().message,
             Catch::StartsWith("systemctl restart k3s failed (exit code 1: "));
  CHECK_THAT(r.error().message, Catch::Contains("Job for k3s.service failed"));
  CHECK_THAT(r.error().fix, Catch::Contains("journalctl -u k3s"));
  CHECK(test::snapshot_tree(sim.root) == before);
}

TEST_CASE("the restart runs systemctl by argv with at most two minutes",
          "[handler]") {
  SimHost sim("toolkit-after-k3s", /*fake_runner=*/true);
  sim.fake.on_run = [&] {
    sim.write(kConfig,
              test::read_text(test::fixture("containerd/v3-nvidia.toml")));
  };
  REQUIRE(sim.apply(std::chrono::minutes(10)).ok());
  REQUIRE(sim.fake.calls.size() == 1);
  CHECK(sim.fake.calls[0] ==
        std::vector<std::string>{"systemctl", "restart", "k3s"});
  CHECK(sim.fake.timeouts[0] == std::chrono::minutes(2));
  // With less time left, the restart gets only what is left.
  sim.write(kConfig,
            test::read_text(test::fixture("containerd/v3-no-nvidia.toml")));
  REQUIRE(sim.apply(std::chrono::seconds(30)).ok());
  CHECK(sim.fake.timeouts[1] == std::chrono::seconds(30));
}

TEST_CASE("a config that is never re-rendered times out at the deadline",
          "[handler]") {
  SimHost sim("toolkit-after-k3s", /*fake_runner=*/true);
  const auto start = sim.clock.steady_now();
  auto r = sim.apply(std::chrono::seconds(90));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == ExitCode::kTimeout);
  CHECK_THAT(r.error().message,
             Catch::Contains("was not re-rendered with the nvidia runtime"));
  // It polled (on the fake clock) right up to the deadline, not past it.
  CHECK(sim.clock.steady_now() - start == std::chrono::seconds(90));
}

TEST_CASE(
    "a config re-rendered without the runtime is reported once it settles",
    "[handler]") {
  SimHost sim("toolkit-after-k3s", /*fake_runner=*/true);
  sim.fake.on_run = [&] {
    // k3s came up but did not find the runtime: same content, new file.
    sim.write(
        kConfig,
        test::read_text(test::fixture("containerd/v3-no-nvidia.toml")) + "\n");
  };
  const auto start = sim.clock.steady_now();
  auto r = sim.apply();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == ExitCode::kBlocked);
  CHECK_THAT(r.error().message,
             Catch::Contains("still without the nvidia runtime"));
  CHECK(sim.clock.steady_now() - start < std::chrono::seconds(10));
}

TEST_CASE("a half-written config is waited out rather than reported",
          "[handler]") {
  SimHost sim("toolkit-after-k3s", /*fake_runner=*/true);
  sim.fake.on_run = [&] { sim.write(kConfig, "version = 3\n[plugins.'io"); };
  int sleeps = 0;
  // The first poll finds the torn write; the file is completed later.
  struct Completing : test::FakeClock {
    std::function<void()> at_sleep;
    void sleep_for(milliseconds d) override {
      test::FakeClock::sleep_for(d);
      if (at_sleep) at_sleep();
    }
  };
  Completing clock;
  clock.at_sleep = [&] {
    if (++sleeps == 3) {
      sim.write(kConfig,
                test::read_text(test::fixture("containerd/v3-nvidia.toml")));
    }
  };
  ComposedHost host(*sim.fs, sim.fake, clock, 0, "gpu-node-1");
  Context ctx(host, sim.opts, clock.steady_now() + std::chrono::minutes(1));
  REQUIRE(sim.stage->apply(ctx, Check{}).ok());
  CHECK(sleeps == 3);
}

TEST_CASE("without time left the restart is not attempted", "[handler]") {
  SimHost sim("toolkit-after-k3s", /*fake_runner=*/true);
  auto r = sim.apply(milliseconds(0));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == ExitCode::kTimeout);
  CHECK(sim.fake.calls.empty());
}

TEST_CASE("without a k3s unit there is nothing to restart", "[handler]") {
  SimHost sim("toolkit-after-k3s", /*fake_runner=*/true);
  sim.remove("/etc/systemd/system/k3s.service");
  sim.opts.restart_k3s = true;
  Check c = sim.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK_THAT(c.fix, Catch::Contains("k3s (or k3s-agent on an agent node)"));
  CHECK(any_contains(c.details, "cannot restart k3s"));
  auto r = sim.apply();
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message,
             Catch::Contains("no k3s.service or k3s-agent.service"));
  CHECK(sim.fake.calls.empty());
}

}  // namespace
}  // namespace gpunode
