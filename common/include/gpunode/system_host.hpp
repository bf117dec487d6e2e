// The real Host: the machine's file system under a root, posix_spawn, and
// the system clocks. Also the pieces, so tests can swap one (e.g. the clock).
#pragma once

#include <memory>
#include <string>

#include "gpunode/host.hpp"

namespace gpunode {

std::unique_ptr<FileSystem> make_rooted_file_system(const std::string& root);
std::unique_ptr<ProcessRunner> make_posix_process_runner();
std::unique_ptr<Clock> make_system_clock();

// Owns nothing: a Host made of parts that live elsewhere.
class ComposedHost : public Host {
 public:
  ComposedHost(FileSystem& fs, ProcessRunner& proc, Clock& clock, uid_t uid,
               std::string hostname)
      : fs_(fs),
        proc_(proc),
        clock_(clock),
        uid_(uid),
        hostname_(std::move(hostname)) {}
  FileSystem& fs() override { return fs_; }
  ProcessRunner& proc() override { return proc_; }
  Clock& clock() override { return clock_; }
  uid_t effective_uid() const override { return uid_; }
  std::string hostname() const override { return hostname_; }

 private:
  FileSystem& fs_;
  ProcessRunner& proc_;
  Clock& clock_;
  uid_t uid_;
  std::string hostname_;
};

// The machine gpunode runs on, with host paths under `root`.
std::unique_ptr<Host> make_system_host(const std::string& root);

}  // namespace gpunode
