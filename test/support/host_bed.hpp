// The one host test bed of the unit tests: a temporary root (a host tree
// from test/sim/host-tree.sh, or the bare directory), the real rooted file
// system over it, a process runner (the real one, or the test's fake), a
// clock that moves only when slept on, the run's Options rooted there, and
// an environment restored at the end.
//
// The stage-specific beds (driver_sim_host.hpp, handler_test's SimHost,
// toolkit_test's Tree, context_test's Bed, cluster_bed.hpp) are thin
// adapters over it that add what their stage needs.
#pragma once

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "gpunode/context.hpp"
#include "gpunode/stage.hpp"
#include "gpunode/system_host.hpp"
#include "test_support.hpp"

namespace gpunode::test {

struct HostBed {
  // `scenario` empty: the temporary directory itself is the root, with
  // nothing in it. `runner` null: programs run through the real runner.
  explicit HostBed(const std::string& scenario = "",
                   ProcessRunner* runner = nullptr,
                   const std::string& hostname = "gpu-node-1")
      : root(scenario.empty() ? tmp.path() : tmp.path() + "/root"),
        fs((scenario.empty() ? void() : make_host_tree(root, scenario),
            make_rooted_file_system(root))),
        proc(make_posix_process_runner()),
        host(*fs, runner ? *runner : *proc, clock, 0, hostname) {
    opts.root = root;
  }
  HostBed(const HostBed&) = delete;
  HostBed& operator=(const HostBed&) = delete;

  // The simulated programs (test/sim/bin: nvidia-smi, systemctl, dmesg,
  // k3s) first on PATH, answering for this root.
  void use_sim_programs() {
    const char* path = std::getenv("PATH");
    env.set("PATH", std::string(GPUNODE_TEST_SIM) + "/bin:" +
                        (path ? path : "/usr/local/bin:/usr/bin:/bin"));
    env.set("GPUNODE_SIM_ROOT", root);
  }

  // A run's Context with `time_left` before its deadline.
  Context context(
      std::chrono::milliseconds time_left = std::chrono::minutes(10)) {
    return Context(host, opts, clock.steady_now() + time_left);
  }

  // `stage`'s check(), which must never change the host: `unchanged` says
  // whether the tree is as it was, `before` is the tree before.
  Check check_untouched(Stage& stage, std::chrono::milliseconds time_left =
                                          std::chrono::minutes(10)) {
    Context ctx = context(time_left);
    before = snapshot_tree(root);
    Check c = stage.check(ctx);
    unchanged = snapshot_tree(root) == before;
    return c;
  }

  TempDir tmp;
  std::string root;
  std::unique_ptr<FileSystem> fs;
  std::unique_ptr<ProcessRunner> proc;
  FakeClock clock;
  ComposedHost host;
  Options opts;
  ScopedEnv env;
  std::map<std::string, std::string> before;
  bool unchanged = false;
};

}  // namespace gpunode::test
