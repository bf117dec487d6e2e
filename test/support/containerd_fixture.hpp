// A real, private containerd for tests: its own root, state and socket under
// a temp dir, the CRI plugin off. Tests import images into it with the real
// `ctr` and look at what containerd made of them.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpunode/host.hpp"
#include "service_process.hpp"
#include "test_support.hpp"

namespace gpunode::test {

class Containerd {
 public:
  // Started on first use (about 0.1 s); stopped (SIGTERM, wait, then
  // SIGKILL) at process exit and its temp dir removed. If the test binary
  // is killed outright, the kernel kills containerd too (setpriv
  // --pdeathsig, where available). Throws std::runtime_error, with the tail
  // of containerd's log, when it does not come up within 10 s.
  static Containerd& shared();
  // Another one, of the caller's own (one per simulated node of a cluster):
  // the same set-up and guarantees, stopped when the pointer goes. Throws
  // as shared() does.
  static std::unique_ptr<Containerd> start_private();

  ~Containerd();
  Containerd(const Containerd&) = delete;
  Containerd& operator=(const Containerd&) = delete;

  const std::string& socket() const { return socket_; }
  // Holds a `k3s` wrapper: `k3s ctr ARGS...` runs `ctr --address <socket>
  // ARGS...` (namespace k8s.io unless -n or CONTAINERD_NAMESPACE says
  // otherwise, as the real `k3s ctr`); any other subcommand exits 1 with a
  // message. Put it first on PATH for gpunode.
  const std::string& bin_dir() const { return bin_dir_; }
  const std::string& log_path() const { return log_; }
  // containerd's root directory (its content store is under it).
  std::string root_dir() const { return dir_->path() + "/root"; }

  // `ctr --address <socket> -n k8s.io ARGS...` (posix runner, 60 s).
  ProcessResult ctr(const std::vector<std::string>& args);
  // `ctr -n k8s.io images ls -q`. Throws when ctr fails.
  std::vector<std::string> image_names();
  // digest -> size for every blob in k8s.io, from `ctr -n k8s.io content
  // ls`. The size is ctr's text ("10.24kB"; ctr prints only rounded sizes);
  // the digests are what prove "content store unchanged". Throws when ctr
  // fails.
  std::map<std::string, std::string> content_digests();
  // Empties k8s.io: removes every image (`images rm --sync`), every lease
  // (an interrupted ctr leaves one, and it keeps content alive) and then
  // every blob left (`content rm`), so each test starts from nothing.
  // Throws if images or content remain. (ctr 1.6 cannot abort unfinished
  // ingests; a failed `ctr import` aborts its own.)
  void reset();

 private:
  Containerd();
  void start();
  void stop();
  std::string log_tail() const;

  std::unique_ptr<TempDir> dir_;
  std::string socket_dir_;  // only when $TMPDIR is too long for a socket
  std::string socket_;
  std::string bin_dir_;
  std::string log_;
  std::string ctr_path_;
  ServiceProcess service_;
  std::unique_ptr<ProcessRunner> runner_;
};

// `containerd` and `ctr` are on PATH and we are root.
bool containerd_available();

}  // namespace gpunode::test

// An end-to-end test that needs the real containerd fails (never passes)
// without it: CI has it, so a missing one is a broken machine.
#define REQUIRE_PARTS()                         \
  if (!gpunode::test::containerd_available())   \
    FAIL("needs root and Debian's containerd"); \
  do {                                          \
  } while (false)
