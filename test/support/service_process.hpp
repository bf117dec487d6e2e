// A background service a test fixture runs (containerd, the k3s
// simulator): started with posix_spawn in a process group of its own,
// stdin /dev/null, stdout and stderr appended to one log; stopped with
// SIGTERM to the group, then SIGKILL after a grace period, and reaped. The
// one way the C++ fixtures start a service (test::Background runs one-shot
// children, with separate stdout and stderr).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace gpunode::test {

class ServiceProcess {
 public:
  ServiceProcess() = default;
  ServiceProcess(const ServiceProcess&) = delete;
  ServiceProcess& operator=(const ServiceProcess&) = delete;
  ~ServiceProcess() { stop(); }

  // Starts argv[0] (a path, not searched) with the parent's environment.
  // `session`: a session of its own (setsid), else only a process group.
  // false when posix_spawn failed.
  bool start(const std::vector<std::string>& argv, const std::string& log,
             bool session = false);
  // True once it exited (it is then reaped, and stop() has nothing to do).
  bool exited();
  // SIGTERM to its group, up to `grace` for it to end, then SIGKILL.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// The last `bytes` of the file at `path`, or "(no log)".
std::string file_tail(const std::string& path, std::size_t bytes = 4000);

}  // namespace gpunode::test
