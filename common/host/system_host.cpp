// The real clocks and the Host that ties the real pieces together.
#include "gpunode/system_host.hpp"

#include <unistd.h>

#include <chrono>
#include <memory>

namespace gpunode {
namespace {

class SystemClock : public Clock {
 public:
  std::chrono::system_clock::time_point now() const override {
    return std::chrono::system_clock::now();
  }
  std::chrono::steady_clock::time_point steady_now() const override {
    return std::chrono::steady_clock::now();
  }
  void sleep_for(std::chrono::milliseconds d) override {
    ::usleep(static_cast<useconds_t>(d.count()) * 1000);
  }
};

class SystemHost : public Host {
 public:
  explicit SystemHost(const std::string& root)
      : fs_(make_rooted_file_system(root)),
        proc_(make_posix_process_runner()),
        clock_(make_system_clock()) {}
  FileSystem& fs() override { return *fs_; }
  ProcessRunner& proc() override { return *proc_; }
  Clock& clock() override { return *clock_; }
  uid_t effective_uid() const override { return ::geteuid(); }
  std::string hostname() const override {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
  }

 private:
  std::unique_ptr<FileSystem> fs_;
  std::unique_ptr<ProcessRunner> proc_;
  std::unique_ptr<Clock> clock_;
};

}  // namespace

std::unique_ptr<Clock> make_system_clock() {
  return std::make_unique<SystemClock>();
}

std::unique_ptr<Host> make_system_host(const std::string& root) {
  return std::make_unique<SystemHost>(root);
}

}  // namespace gpunode
