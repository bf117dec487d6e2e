// Helpers shared by the unit and end-to-end tests: scratch directories, a
// clock that only moves when told, snapshots of a host tree (to prove that a
// refused run changed nothing), and the simulated host's programs.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpunode/host.hpp"
#include "gpunode/system_host.hpp"

namespace gpunode::test {

// A fresh directory under $TMPDIR, removed (recursively) at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// sleep_for() advances time instantly.
class FakeClock : public Clock {
 public:
  std::chrono::system_clock::time_point now() const override { return wall_; }
  std::chrono::steady_clock::time_point steady_now() const override {
    return steady_;
  }
  void sleep_for(std::chrono::milliseconds d) override { advance(d); }
  void advance(std::chrono::milliseconds d) {
    wall_ += d;
    steady_ += d;
  }

 private:
  std::chrono::system_clock::time_point wall_ =
      std::chrono::system_clock::time_point(std::chrono::seconds(1795000000));
  std::chrono::steady_clock::time_point steady_{};
};

// Sets environment variables for one test and puts the old values back:
// the posix runner hands this process's environment to the simulated
// programs (nvidia-smi, systemctl).
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }
  void set(const std::string& name, const std::string& value) {
    save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) {
    save(name);
    ::unsetenv(name.c_str());
  }

 private:
  void save(const std::string& name) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name,
                        old ? std::optional<std::string>(old) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// True when one of the lines contains `s`.
bool any_contains(const std::vector<std::string>& lines, const std::string& s);

std::string base64(const std::string& data);

// /etc/rancher/k3s/k3s.yaml in k3s's exact shape (cluster, user and context
// all "default"), from base64 data; `cluster_extra` and `user_extra` are
// extra lines, already indented, for the tests of odd kubeconfigs.
std::string k3s_kubeconfig(const std::string& server, const std::string& ca_b64,
                           const std::string& cert_b64,
                           const std::string& key_b64,
                           const std::string& cluster_extra = "",
                           const std::string& user_extra = "");

// path (relative to the tree) -> "mode:size:sha256" for every entry, links
// included as "link:target". Two equal snapshots mean nothing changed.
std::map<std::string, std::string> snapshot_tree(const std::string& dir);
// snapshot_tree of a host tree without gpunode's own state directory
// (/var/lib/gpunode): what a refused run must leave as it was.
std::map<std::string, std::string> snapshot_host_tree(const std::string& root);

std::string read_text(const std::string& path);
// The last line of a command's output, without its newline: the result
// event of a --json run, after any progress events.
std::string last_line(const std::string& text);
// The last --json event of `stage` that carries facts (install reports the
// check, then the check after its apply), or null when there is none.
nlohmann::json last_stage_event(const std::string& out,
                                const std::string& stage);
// Damages a file in place: one byte at `offset` XOR 0x01 (tamper tests).
void flip_byte(const std::string& path, std::uint64_t offset);
void write_text(const std::string& path, const std::string& text,
                unsigned mode = 0644);

// The files of a node of a cluster that runs k3s's embedded registry mirror
// for nvcr.io (installer/containerd/registry_mirror.hpp): registries.yaml's
// mirrors on every node, and on a server `embedded-registry: true` in its
// config.yaml (kept, appended to), on an agent the hosts.toml k3s renders
// with its local endpoint.
// Runs argv[0] (searched on `env`'s PATH, else the parent's) with exactly
// `env`, waits, and returns its exit code (128 + signal when killed): the
// tools' way to run one command inside a simulated environment.
int spawn_and_wait(char* const* argv, std::vector<std::string> env);

void write_mirror_files(const std::string& root, bool agent);
std::string fixture(const std::string& relative);  // test/fixtures/<relative>

// Builds a simulated host tree with test/sim/host-tree.sh (the same script
// the demo uses). Scenarios are listed in that script.
void make_host_tree(const std::string& dir, const std::string& scenario);

// Runs a program (argv) with extra environment entries ("K=V") and the
// simulated host's programs (test/sim/bin) first on PATH.
struct Run {
  int exit_code;
  std::string out;
  std::string err;
};
Run run_with_sim(const std::vector<std::string>& argv,
                 const std::vector<std::string>& env = {},
                 std::chrono::milliseconds timeout = std::chrono::seconds(60));

// A child started in its own process group; killed (with its group) when it
// goes out of scope unless waited for.
class Background {
 public:
  Background(const std::vector<std::string>& argv,
             const std::vector<std::string>& env = {});
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  Run wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  void kill_all(int sig);
  std::string err_so_far() const;
  pid_t pid() const { return pid_; }

 private:
  std::unique_ptr<TempDir> io_;
  pid_t pid_ = -1;
};

// Runs the gpunode binary under test.
Run run_gpunode(const std::vector<std::string>& args,
                const std::vector<std::string>& env = {});

// The exit status of a test binary whose test cases all skipped: ctest shows
// it as "Skipped" (SKIP_RETURN_CODE in test/CMakeLists.txt), the packaging
// scripts use the same. Catch2 v2 has no SKIP of its own.
inline constexpr int kSkipExitCode = 77;

// Marks the running test case as skipped for `reason` and prints
// "SKIPPED: <reason>" on stdout, where scripts/test.sh collects the reasons.
// The caller returns right after (GPUNODE_SKIP does both). Only for what a
// developer's machine may lack and CI may too (a GPU); what setup.sh
// installs (containerd) or CI always has (root) is a FAIL when missing.
void skip_test(const std::string& reason);
bool test_skipped();   // skip_test() was called in this test case
void reset_skipped();  // a new test case starts (test/catch_main.cpp)

// Ends every process in the tree under `pid` (its descendants, whatever
// process group they moved to) and then `pid`'s own group with `sig`.
void kill_tree(pid_t pid, int sig);
// True while `pid` runs (not gone, not a zombie).
bool process_running(pid_t pid);

}  // namespace gpunode::test

// Skips the running test case (see skip_test) and returns from it.
#define GPUNODE_SKIP(reason)            \
  do {                                  \
    ::gpunode::test::skip_test(reason); \
    return;                             \
  } while (0)
