// Child programs that misbehave (issue 11, items 9 and 10), met by the real
// binary through the simulated nvidia-smi (test/sim/bin/nvidia-smi): one
// that exits but leaves a background job holding its output, and one that
// prints far more than gpunode keeps.
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "bad_inputs.hpp"
#include "gpunode/host.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

namespace gpunode::test::bad {
namespace {

using namespace std::chrono_literals;

BadInput smi_mode(std::string name, std::string mode, int code,
                  std::string fragment) {
  return BadInput{std::move(name),
                  "good-v3",
                  kNone,
                  [mode](Env& e) {
                    e.env.push_back("GPUNODE_SIM_GPU_MODE=" + mode);
                    return e.install({});
                  },
                  code,
                  std::move(fragment)};
}

}  // namespace

TEST_CASE("bad inputs: child programs", "[e2e][bad-inputs]") {
  const std::vector<BadInput> cases = {
      // Its own failure, at once: not a timeout blamed on the driver after
      // the full --timeout (20 s here) that the job's open stdout used to
      // cost.
      smi_mode("nvidia-smi fails and leaves a job holding its output",
               "orphan-fail", 1, "nvidia-smi failed (exit code 15: Unable"),
      // 64 MiB of well-formed lines: kept up to the cap, and said so.
      smi_mode(
          "nvidia-smi prints 64 MiB", "flood", 1,
          "output cut at " + std::to_string(kMaxCapturedBytes >> 20) + " MiB"),
      // It used to say "failed ()": ctr printed nothing before it died.
      {"k3s ctr killed by a signal", "good-v3", kContainerd,
       [](Env& e) {
         build_image(e.dir + "/dp.tar", ImageSpec{});
         e.env.push_back("GPUNODE_TEST_K3S_CTR_SIGNAL=KILL");
         return e.install(
             {"--only", "image", "--image-archive", e.dir + "/dp.tar"});
       },
       1, "failed (killed by signal 9 (SIGKILL))"},
  };
  run_table("child programs", cases);
}

TEST_CASE(
    "an nvidia-smi that leaves a background job answers at its exit and the "
    "job is ended",
    "[e2e][host][process]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  const std::string pidfile = t.path() + "/job.pid";
  make_host_tree(root, "good-v3");
  // Everything but gpunode's own state dir (keys are "/path").
  auto outside_state = [&root]() {
    auto snap = snapshot_tree(root);
    snap.erase(snap.lower_bound("/var/lib/gpunode"),
               snap.lower_bound("/var/lib/gpunode\x7f"));
    return snap;
  };
  const auto before = outside_state();
  const auto t0 = std::chrono::steady_clock::now();
  Run r = run_gpunode(
      {"install", "--root", root, "--only", "preflight,driver", "--timeout",
       "30s"},
      {"GPUNODE_SIM_GPU_MODE=orphan", "GPUNODE_SIM_GPU_PIDFILE=" + pidfile});
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("NVIDIA H200"));
  CHECK(took < 10s);  // not the 30 s --timeout
  CHECK(outside_state() == before);
  const pid_t job = static_cast<pid_t>(std::stol(read_text(pidfile)));
  for (int i = 0; i < 200 && process_running(job); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  CHECK_FALSE(process_running(job));
  if (process_running(job)) ::kill(job, SIGKILL);
}

}  // namespace gpunode::test::bad
