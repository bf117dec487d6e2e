// Helpers shared by the unit and end-to-end tests: scratch directories, a
// clock that only moves when told, snapshots of a host tree (to prove that a
// refused run changed nothing), and the simulated host's programs.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
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

// path (relative to the tree) -> "mode:size:sha256" for every entry, links
// included as "link:target". Two equal snapshots mean nothing changed.
std::map<std::string, std::string> snapshot_tree(const std::string& dir);

std::string read_text(const std::string& path);
void write_text(const std::string& path, const std::string& text,
                unsigned mode = 0644);
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

}  // namespace gpunode::test
