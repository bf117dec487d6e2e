// The toolkit stage and the runtime search under it: does gpunode find
// nvidia-container-runtime where k3s will, in the same order, over the
// simulated host trees of test/sim/host-tree.sh?
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "containerd/runtime_search.hpp"
#include "gpunode/stage.hpp"
#include "gpunode/system_host.hpp"
#include "host_bed.hpp"
#include "stages/stages.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

using test::any_contains;

// A host tree under a temporary root (the one host bed); the toolkit stage
// runs no programs.
struct Tree : test::HostBed {
  explicit Tree(const std::string& scenario) : HostBed(scenario) {}

  Check check() {
    auto stage = make_toolkit_stage();
    return check_untouched(*stage);
  }

  void exe(const std::string& host_path) {
    test::write_text(root + host_path, "#!/bin/sh\nexit 0\n", 0755);
  }
};

TEST_CASE(
    "the toolkit stage is named for its layer, and without a bundle its "
    "apply refuses and changes nothing",
    "[toolkit]") {
  auto stage = make_toolkit_stage();
  REQUIRE(stage != nullptr);
  CHECK(stage->name() == "toolkit");
  CHECK(stage->layer() == "nvidia-container-runtime");
  Tree t("good-v3");
  Context ctx(t.host, t.opts, t.clock.steady_now());
  auto before = test::snapshot_tree(t.root);
  // apply() installs only the bundle's packages (toolkit_install_test.cpp).
  auto r = stage->apply(ctx, Check{});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().exit == ExitCode::kBlocked);
  CHECK(test::snapshot_tree(t.root) == before);
}

TEST_CASE("k3s's search order is the toolkit dir, kwasm, then the systemd PATH",
          "[toolkit]") {
  CHECK(runtime_search_dirs() ==
        std::vector<std::string>{"/usr/local/nvidia/toolkit", "/opt/kwasm/bin",
                                 "/usr/local/sbin", "/usr/local/bin",
                                 "/usr/sbin", "/usr/bin", "/sbin", "/bin"});
  std::vector<std::string> handlers;
  for (const auto& c : nvidia_runtime_candidates())
    handlers.push_back(c.handler + "=" + c.binary);
  CHECK(handlers ==
        std::vector<std::string>{
            "nvidia=nvidia-container-runtime",
            "nvidia-experimental=nvidia-container-runtime-experimental",
            "nvidia-cdi=nvidia-container-runtime.cdi"});
}

TEST_CASE("the first directory on the search path wins for each handler",
          "[toolkit]") {
  test::TempDir tmp;
  auto exe = [&](const std::string& p) {
    test::write_text(tmp.path() + p, "#!/bin/sh\n", 0755);
  };
  exe("/usr/bin/nvidia-container-runtime");
  exe("/usr/local/bin/nvidia-container-runtime");
  exe("/bin/nvidia-container-runtime.cdi");
  exe("/opt/kwasm/bin/nvidia-container-runtime-experimental");
  auto fs = make_rooted_file_system(tmp.path());
  const RuntimeSearch s = find_nvidia_runtimes(*fs);
  REQUIRE(s.found.size() == 3);
  CHECK(s.nvidia_path() ==
        std::optional<std::string>("/usr/local/bin/nvidia-container-runtime"));
  CHECK(s.find("nvidia-experimental")->path ==
        "/opt/kwasm/bin/nvidia-container-runtime-experimental");
  CHECK(s.find("nvidia-cdi")->path == "/bin/nvidia-container-runtime.cdi");
  CHECK(s.handler_names() == "nvidia, nvidia-experimental, nvidia-cdi");
  CHECK(s.nvidia_locations ==
        std::vector<std::string>{"/usr/local/bin/nvidia-container-runtime",
                                 "/usr/bin/nvidia-container-runtime"});
  // Two copies, but the toolkit dir is not involved: nothing shadows.
  CHECK_FALSE(s.toolkit_dir_shadows());
}

TEST_CASE("a runtime without an execute bit is skipped, as LookPath skips it",
          "[toolkit]") {
  test::TempDir tmp;
  test::write_text(tmp.path() + "/usr/bin/nvidia-container-runtime",
                   "#!/bin/sh\n", 0644);
  auto fs = make_rooted_file_system(tmp.path());
  const RuntimeSearch s = find_nvidia_runtimes(*fs);
  CHECK(s.found.empty());
  CHECK(s.nvidia_locations.empty());
  CHECK(s.not_executable ==
        std::vector<std::string>{"/usr/bin/nvidia-container-runtime"});
}

TEST_CASE("on a merged-/usr host /bin and /usr/bin are one location, not two",
          "[toolkit]") {
  test::TempDir tmp;
  test::write_text(tmp.path() + "/usr/bin/nvidia-container-runtime",
                   "#!/bin/sh\n", 0755);
  test::write_text(
      tmp.path() + "/usr/local/nvidia/toolkit/nvidia-container-runtime",
      "#!/bin/sh\n", 0755);
  REQUIRE(::symlink("usr/bin", (tmp.path() + "/bin").c_str()) == 0);
  auto fs = make_rooted_file_system(tmp.path());
  const RuntimeSearch s = find_nvidia_runtimes(*fs);
  CHECK(s.nvidia_locations ==
        std::vector<std::string>{
            "/usr/local/nvidia/toolkit/nvidia-container-runtime",
            "/usr/bin/nvidia-container-runtime"});
  CHECK(s.toolkit_dir_shadows());
}

TEST_CASE("the k3s unit is found as k3s or k3s-agent in any systemd unit dir",
          "[toolkit]") {
  test::TempDir tmp;
  auto fs = make_rooted_file_system(tmp.path());
  CHECK(find_k3s_unit(*fs) == std::nullopt);
  test::write_text(tmp.path() + "/usr/lib/systemd/system/k3s-agent.service",
                   "[Unit]\n");
  CHECK(find_k3s_unit(*fs) == std::optional<std::string>("k3s-agent"));
  test::write_text(tmp.path() + "/lib/systemd/system/k3s.service", "[Unit]\n");
  CHECK(find_k3s_unit(*fs) == std::optional<std::string>("k3s"));
}

TEST_CASE(
    "hosts with the toolkit installed are satisfied, naming the path and "
    "handlers",
    "[toolkit]") {
  struct Case {
    const char* scenario;
    const char* path;
    const char* handlers;
  };
  const std::vector<Case> cases = {
      {"good-v3", "/usr/bin/nvidia-container-runtime",
       "handlers nvidia, nvidia-cdi"},
      {"good-v2", "/usr/bin/nvidia-container-runtime",
       "handlers nvidia, nvidia-experimental"},
      {"agent", "/usr/bin/nvidia-container-runtime",
       "handlers nvidia, nvidia-cdi"},
      {"toolkit-after-k3s", "/usr/bin/nvidia-container-runtime",
       "handlers nvidia, nvidia-cdi"},
      {"toolkit-dir", "/usr/local/nvidia/toolkit/nvidia-container-runtime",
       "handler nvidia"},
      {"stale-handler", "/usr/local/nvidia/toolkit/nvidia-container-runtime",
       "handler nvidia"},
      {"no-systemd-cgroup", "/usr/bin/nvidia-container-runtime",
       "handlers nvidia, nvidia-cdi"},
      {"template-override", "/usr/bin/nvidia-container-runtime",
       "handlers nvidia, nvidia-cdi"},
      {"malformed-config", "/usr/bin/nvidia-container-runtime",
       "handler nvidia"},
      {"no-config", "/usr/bin/nvidia-container-runtime", "handler nvidia"},
  };
  for (const auto& k : cases) {
    INFO(k.scenario);
    Tree t(k.scenario);
    Check c = t.check();
    CHECK(c.status == CheckStatus::kSatisfied);
    CHECK(c.code == "toolkit.ok");
    CHECK(c.summary == std::string("nvidia-container-runtime at ") + k.path +
                           "; k3s creates runtime " + k.handlers +
                           " when it starts");
    CHECK(c.warnings.empty());
    CHECK(t.unchanged);
  }
}

TEST_CASE(
    "no toolkit anywhere blocks with the package to install and the restart",
    "[toolkit]") {
  Tree t("no-toolkit");
  Check c = t.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "toolkit.missing");
  CHECK(c.exit == ExitCode::kBlocked);
  CHECK_THAT(c.summary,
             Catch::Contains("/usr/local/nvidia/toolkit:/opt/kwasm/bin:"));
  CHECK_THAT(c.fix, Catch::Contains("nvidia-container-toolkit"));
  CHECK_THAT(c.fix, Catch::Contains("offline"));
  CHECK_THAT(c.fix, Catch::Contains("sudo systemctl restart k3s"));
  CHECK_THAT(c.fix, Catch::Contains("only when it starts"));
  CHECK(t.unchanged);
}

TEST_CASE("on an agent node the missing-toolkit fix restarts k3s-agent",
          "[toolkit]") {
  Tree t("agent");
  ::unlink((t.root + "/usr/bin/nvidia-container-runtime").c_str());
  ::unlink((t.root + "/usr/bin/nvidia-container-runtime.cdi").c_str());
  Check c = t.check();
  CHECK(c.code == "toolkit.missing");
  CHECK_THAT(c.fix, Catch::Contains("sudo systemctl restart k3s-agent"));
}

TEST_CASE(
    "a toolkit that lacks only the main binary still blocks, naming what it "
    "found",
    "[toolkit]") {
  Tree t("good-v3");
  ::unlink((t.root + "/usr/bin/nvidia-container-runtime").c_str());
  Check c = t.check();
  CHECK(c.code == "toolkit.missing");
  CHECK(any_contains(
      c.details, "/usr/bin/nvidia-container-runtime.cdi (handler nvidia-cdi)"));
}

TEST_CASE(
    "a non-executable runtime is named with the chmod that makes k3s see it",
    "[toolkit]") {
  Tree t("no-toolkit");
  test::write_text(t.root + "/usr/bin/nvidia-container-runtime", "#!/bin/sh\n",
                   0644);
  Check c = t.check();
  CHECK(c.code == "toolkit.missing");
  CHECK(any_contains(c.details,
                     "sudo chmod 0755 /usr/bin/nvidia-container-runtime"));
}

TEST_CASE(
    "a leftover toolkit dir that shadows /usr/bin is satisfied with a warning",
    "[toolkit]") {
  Tree t("toolkit-shadow");
  Check c = t.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.code == "toolkit.shadowed");
  CHECK_THAT(
      c.summary,
      Catch::Contains("/usr/local/nvidia/toolkit/nvidia-container-runtime"));
  REQUIRE(c.warnings.size() == 1);
  const std::string& w = c.warnings.front();
  CHECK_THAT(w, Catch::Contains("shadows /usr/bin/nvidia-container-runtime"));
  CHECK_THAT(w, Catch::Contains("uses the toolkit-dir binary"));
  CHECK_THAT(w, Catch::Contains("GPU operator is gone"));
  CHECK_THAT(w, Catch::Contains("sudo rm -r /usr/local/nvidia/toolkit"));
  CHECK_THAT(w, Catch::Contains("sudo systemctl restart k3s"));
  CHECK(t.unchanged);
}

TEST_CASE("the toolkit inputs change when the runtime moves", "[toolkit]") {
  Tree t("good-v3");
  Context ctx(t.host, t.opts, t.clock.steady_now());
  auto stage = make_toolkit_stage();
  const std::string before = stage->inputs(ctx);
  CHECK_THAT(before, Catch::Contains("root=" + t.root));
  CHECK_THAT(before, Catch::Contains("/usr/bin/nvidia-container-runtime"));
  t.exe("/usr/local/nvidia/toolkit/nvidia-container-runtime");
  CHECK(stage->inputs(ctx) != before);
}

}  // namespace
}  // namespace gpunode
