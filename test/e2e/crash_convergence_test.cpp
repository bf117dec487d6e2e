// Crash anywhere, rerun, converge. For every stage boundary and for points
// inside the journal write, the image import and the API writes, gpunode is
// killed with SIGKILL right there (test-only crash points,
// common/include/gpunode/crash_point.hpp), then `install` is run again. The end
// state (simulator objects, containerd's image with its digest and pin, the
// journal, the state directory) must equal that of an uninterrupted run, and a
// rerun after a crash must not import an image containerd already holds
// complete. Also: real SIGKILLs at moments chosen by the clock, and
// SIGINT/SIGTERM (finish or undo the write in flight, journal it, release
// the lock, exit 130, the next run resumes). And a power cut inside the
// toolkit's package transaction, while dpkg runs a maintainer script.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "sim_gpu_node.hpp"
#include "test_support.hpp"
#include "toolkit_bundle.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

const EndState& reference_state() {
  static const EndState reference = [] {
    SimGpuNode node;
    Run r = node.install();
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return end_state(node);
  }();
  return reference;
}

// The allocatable stage applies (waits) only when the plugin has not
// advertised yet at its check: with the usual 50 ms a loaded machine can be
// slower than the plugin, the stage is satisfied at once and a point inside
// its apply is never reached. Those points get a plugin that takes 3 s.
int plugin_start_ms_for(const std::string& point) {
  return point.find(":allocatable") != std::string::npos &&
                 point.rfind("check:", 0) != 0
             ? 3000
             : 50;
}

// Crashes at `point`, reruns, and checks the rerun converged to the state
// of an uninterrupted run.
void crash_and_converge(const std::string& point) {
  const EndState& want = reference_state();
  SimGpuNode node("good-v3", 1, plugin_start_ms_for(point));
  Run crashed = node.install({}, {"GPUNODE_TEST_CRASH_AT=" + point});
  INFO("crash point " << point << "\n--- crashed run:\n" << crashed.err);
  // 128 + SIGKILL: it died at the point (a point never reached would let
  // the run finish, and the test say nothing).
  REQUIRE(crashed.exit_code == 128 + SIGKILL);
  const bool complete_before = image_complete(node);

  Run rerun = node.install();
  INFO("--- rerun:\n" << rerun.err);
  REQUIRE(rerun.exit_code == 0);
  const EndState got = end_state(node);
  CHECK(got == want);
  for (const auto& [stage, result] : got.journal)
    CHECK((result == "satisfied" || result == "applied"));
  if (complete_before) {
    // Containerd already held the image complete: pinning it may be left,
    // importing it again is not.
    CHECK(rerun.err.find("and import") == std::string::npos);
  }
  // And the run after that has nothing left to do.
  node.sim->reset_stats();
  Run third = node.install();
  CHECK(third.exit_code == 0);
  CHECK(node.sim->stats()["writes"] == 0);
}

}  // namespace

TEST_CASE("a crash at any stage boundary converges on rerun", "[e2e][crash]") {
  REQUIRE_PARTS();
  const std::string point = GENERATE(
      as<std::string>{}, "check:preflight", "check:driver", "check:toolkit",
      "check:handler", "check:runtimeclass", "check:image", "check:plugin",
      "check:allocatable", "apply:runtimeclass", "applied:runtimeclass",
      "recorded:runtimeclass", "apply:image", "applied:image", "recorded:image",
      "apply:plugin", "applied:plugin", "recorded:plugin", "apply:allocatable",
      "applied:allocatable");
  crash_and_converge(point);
}

TEST_CASE(
    "a crash inside the journal write or the image import or after an API "
    "write converges on rerun",
    "[e2e][crash]") {
  REQUIRE_PARTS();
  const std::string point = GENERATE(
      as<std::string>{},
      // The journal: written at the start, before and after each apply.
      "atomic-write:temp@1", "atomic-write:renamed@1", "atomic-write:temp@2",
      "atomic-write:temp@4", "atomic-write:renamed@5", "atomic-write:temp@7",
      // The import: right after ctr started (ctr dies too, as in a power
      // cut), and after ctr finished but before the checks and the pin.
      "spawned:import", "image-imported",
      // The API server took a write, gpunode never saw the answer.
      "api-write-done@1", "api-write-done@2");
  crash_and_converge(point);
}

TEST_CASE("SIGKILL at moments chosen by the clock converges on rerun",
          "[e2e][crash]") {
  if (!containerd_available()) FAIL("needs root and Debian's containerd");
  // Spread over an uninterrupted run's length (measured here, not assumed).
  SimGpuNode timing;
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(timing.install().exit_code == 0);
  const auto full = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - t0);
  const EndState& want = reference_state();
  std::mt19937 rng(20261129);
  for (int round = 0; round < 4; ++round) {
    const auto delay = std::chrono::milliseconds(
        std::uniform_int_distribution<long>(0, full.count())(rng));
    SimGpuNode node;
    Background run(node.install_argv(), node.env());
    std::this_thread::sleep_for(delay);
    ::kill(run.pid(), SIGKILL);  // gpunode only: children live on, as they
                                 // would after an OOM kill
    run.wait();
    Run rerun = node.install();
    INFO("killed after " << delay.count() << " ms of " << full.count()
                         << " ms\n"
                         << rerun.err);
    REQUIRE(rerun.exit_code == 0);
    CHECK(end_state(node) == want);
  }
}

TEST_CASE(
    "SIGINT or SIGTERM stops at a safe point with exit 130 and the next run "
    "resumes",
    "[e2e][crash][signal]") {
  REQUIRE_PARTS();
  const EndState& want = reference_state();
  struct Case {
    const char* point;
    const char* signal;
  };
  const Case c = GENERATE(
      Case{"check:image", "INT"}, Case{"spawned:import", "INT"},
      Case{"api-write-done@2", "TERM"}, Case{"apply:allocatable", "TERM"});
  INFO("SIG" << c.signal << " at " << c.point);
  SimGpuNode node("good-v3", 1, plugin_start_ms_for(c.point));
  Run stopped =
      node.install({}, {std::string("GPUNODE_TEST_CRASH_AT=") + c.point,
                        std::string("GPUNODE_TEST_CRASH_SIGNAL=") + c.signal});
  INFO(stopped.err);
  CHECK(stopped.exit_code == 130);
  CHECK_THAT(stopped.err, Catch::Contains("interrupted by SIG"));
  CHECK_THAT(stopped.err, Catch::Contains("run the same command again"));
  // Nothing half-imported claims the name: either no record, or a
  // complete one.
  const std::string line = image_line(node);
  if (!line.empty()) CHECK(image_complete(node));
  // The journal says the run was interrupted, and finished its record.
  const EndState after = end_state(node);
  CHECK(after.last_exit == 130);
  CHECK(after.last_finished);
  // The lock is free: the next run starts at once, says where the last one
  // stopped, and converges.
  Run resumed = node.install();
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.err, Catch::Contains("was interrupted"));
  CHECK(end_state(node) == want);
}

TEST_CASE(
    "a power cut while dpkg runs a maintainer script converges on rerun: the "
    "half-configured packages are finished",
    "[e2e][crash][toolkit]") {
  if (const auto why = dpkg_node_unavailable(); !why.empty()) GPUNODE_SKIP(why);
  DpkgNode node;
  write_toolkit_bundle(node.bundle,
                       make_bundle_packages(node.t.path() + "/deb", "deb",
                                            "1.17.8-1", "amd64", "30"));
  const std::vector<std::string> env = node.env();
  Background run(node.install_argv(), env);
  {
    INFO(run.err_so_far());
    REQUIRE(node.wait_for_postinst());
  }
  // The power cut: dpkg, its maintainer script and gpunode die at once.
  const pid_t postinst = std::stoi(read_text(node.postinst_pid_file()));
  const pid_t group = ::getpgid(postinst);
  REQUIRE(group > 0);
  ::kill(-group, SIGKILL);
  ::kill(run.pid(), SIGKILL);
  run.wait();
  const std::string cut = node.states();
  INFO("after the cut:\n" << cut);
  CHECK(cut != all_installed_states());
  CHECK_THAT(cut, Catch::Contains("nvidia-container-toolkit iF"));
  // nvidia-container-runtime is on disk all the same: a rerun must not take
  // it for an installed toolkit.
  CHECK(
      std::filesystem::exists(node.root + "/usr/bin/nvidia-container-runtime"));

  // Without --bundle there is nothing to install them from, but the
  // package manager is asked all the same: blocked (exit 1) with dpkg's own
  // fix, never satisfied, in status and install alike, and nothing changed.
  const std::string journal = node.root + "/var/lib/gpunode/journal.json";
  for (const char* command : {"status", "install"}) {
    INFO(command << " without --bundle");
    Run bare = run_with_sim({GPUNODE_BINARY, command, "--root", node.root,
                             "--only", "toolkit", "--json"},
                            env);
    INFO(bare.err);
    CHECK(bare.exit_code == 1);
    CHECK_THAT(bare.out, Catch::Contains("\"code\":\"toolkit.unfinished\"") &&
                             Catch::Contains("\"status\":\"blocked\""));
    CHECK_THAT(bare.err,
               Catch::Contains("nvidia-container-toolkit 1.17.8-1 (iF: "
                               "half-configured)") &&
                   Catch::Contains("sudo dpkg --configure -a") &&
                   Catch::Contains("--bundle PATH"));
    CHECK(node.states() == cut);
  }
  REQUIRE(std::filesystem::exists(journal));
  CHECK(json::parse(read_text(journal))["stages"]["toolkit"]["result"] ==
        "blocked");

  Run status = run_with_sim(
      {GPUNODE_BINARY, "status", "--root", node.root, "--bundle", node.bundle,
       "--insecure-skip-signature", "--only", "toolkit"},
      env);
  INFO(status.err);
  CHECK_THAT(status.err, Catch::Contains("stopped half-way") &&
                             Catch::Contains("nvidia-container-toolkit "
                                             "1.17.8-1 (iF: half-configured)"));
  Run rerun = run_with_sim(node.install_argv(), env);
  INFO(rerun.err);
  CHECK(rerun.exit_code == 0);
  CHECK_THAT(rerun.out, Catch::Contains("\"code\":\"toolkit.unfinished\""));
  CHECK(node.states() == all_installed_states());
  Run third = run_with_sim(node.install_argv(), env);
  CHECK(third.exit_code == 0);
  CHECK_THAT(third.out, Catch::Contains("\"code\":\"toolkit.ok\""));
}

TEST_CASE("the shipped binary has no crash points", "[e2e][crash]") {
  REQUIRE_PARTS();
  SimGpuNode node;
  std::vector<std::string> argv = node.install_argv();
  argv[0] = GPUNODE_SHIPPED_BINARY;
  std::vector<std::string> env = node.env();
  env.push_back("GPUNODE_TEST_CRASH_AT=check:driver");
  Run r = run_with_sim(argv, env);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(run_gpunode({"version"}).out,
             Catch::Contains("crash points compiled in"));
  Run shipped = run_with_sim({GPUNODE_SHIPPED_BINARY, "version"});
  CHECK(shipped.out.find("crash points") == std::string::npos);
}
