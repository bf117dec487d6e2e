// The bad-input corpus (issue "Resilience"): a table of cases, each one bad
// input, the gpunode command line that meets it, the exit code DESIGN.md's
// table gives for it and a fragment of the message. run_bad_input() builds a
// fresh host tree for each case, snapshots everything gpunode could touch
// (the host tree, the simulated cluster's writes, containerd's images and
// content, the files beside the tree: archives, the bundle), runs gpunode as
// a subprocess with a hang guard, and proves that nothing changed except
// gpunode's own state directory, whose journal must not record any stage as
// done.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "k3s_sim.hpp"
#include "test_support.hpp"

namespace gpunode::test::bad {

// What a case needs beyond the host tree.
enum Needs : unsigned {
  kNone = 0,
  kContainerd = 1,  // the real containerd, with `k3s ctr` on PATH
  kBundle = 2,      // a fresh copy of a signed bundle at Env::bundle
};

// What a case's setup sees and may change.
struct Env {
  std::string dir;        // scratch beside the host tree (archives, keys, ...)
  std::string root;       // the host tree, fresh for every case
  std::string bundle;     // with kBundle: a signed bundle, yours to damage
  std::string key_pub;    // with kBundle: the key that signed it
  K3sSim* sim = nullptr;  // always there: one per test binary, shared
  std::vector<std::string> env;  // extra environment for gpunode ("K=V")

  // `gpunode install --root <root> --timeout 20s ARGS...` (the timeout only
  // when ARGS has none: a case that went on waiting fails fast, with exit 3).
  std::vector<std::string> install(std::vector<std::string> args) const;
};

struct BadInput {
  std::string name;
  std::string scenario = "good-v3";  // test/sim/host-tree.sh
  unsigned needs = kNone;
  // Makes the input bad and returns gpunode's arguments.
  std::function<std::vector<std::string>(Env&)> setup;
  int exit_code;
  std::string fragment;  // must appear in stderr or stdout
};

// The common shape: damage one input on a `scenario` host, then run install
// with `args`.
BadInput damaged(std::string name, std::string scenario,
                 std::function<void(Env&)> damage, int exit_code,
                 std::string fragment, std::vector<std::string> args = {});

// Runs one case with Catch2 assertions (call it inside a DYNAMIC_SECTION).
void run_bad_input(const BadInput& c);

// Runs every case of a table, each in a DYNAMIC_SECTION named after it.
void run_table(const std::string& area, const std::vector<BadInput>& cases);

// Small helpers for the setups.
std::string cd_config(const Env& e);  // host path of k3s's containerd config
void replace_with_dir(const std::string& path);
void replace_with_fifo(const std::string& path);
void truncate_to(const std::string& path, long long bytes);
void sed(const std::string& path, const std::string& from,
         const std::string& to);  // first occurrence; throws when absent

}  // namespace gpunode::test::bad
