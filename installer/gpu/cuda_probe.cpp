// The parent's half of the CUDA probe: forks the child (cuda_calls.cpp),
// reads its lines against the deadline and turns them into a CudaAnswer.
// fork without exec, because the portable build runs under its own ld.so
// (/proc/self/exe is that loader, not gpunode); glibc's fork resets the
// malloc and loader locks in the child, so its dlopen is safe even when
// gpunode has other threads.
//
// The child leads a process group of its own, and its exit (not the end of
// the pipe) ends the wait: a libcuda that leaves a helper process behind,
// holding the pipe, must neither stall the probe nor outlive gpunode (the
// same rule as posix_process_runner.cpp's for programs gpunode runs).
#include "gpu/cuda_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/cuda_calls.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/terminal_text.hpp"
#include "gpunode/unique_fd.hpp"

namespace gpunode {
namespace {

namespace calls = cuda_calls;
using Clock = std::chrono::steady_clock;

// The child writes a few hundred bytes; more is a library gone wrong, and is
// read and dropped so the child never blocks on a full pipe.
constexpr std::size_t kMaxOutput = 64 * 1024;
// How often the wait looks at stop_requested().
constexpr int kTickMs = 50;

// CUresult values from cuda.h that have an outcome of their own.
constexpr int kNoDeviceCode = 100;        // CUDA_ERROR_NO_DEVICE
constexpr int kSystemNotReadyCode = 802;  // CUDA_ERROR_SYSTEM_NOT_READY
constexpr int kDriverMismatchCode = 803;  // ..._SYSTEM_DRIVER_MISMATCH
constexpr int kCompatNotSupportedCode =
    804;                           // ..._COMPAT_NOT_SUPPORTED_ON_DEVICE
constexpr int kUnknownCode = 999;  // CUDA_ERROR_UNKNOWN

CudaOutcome outcome_of(int code) {
  switch (code) {
    case kSystemNotReadyCode:
      return CudaOutcome::kSystemNotReady;
    case kDriverMismatchCode:
    case kCompatNotSupportedCode:
      return CudaOutcome::kDriverMismatch;
    case kNoDeviceCode:
      return CudaOutcome::kNoDevice;
    case kUnknownCode:
      return CudaOutcome::kUnknown;
    default:
      return CudaOutcome::kFailed;
  }
}

std::string duration_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

// What the child said, gathered line by line.
struct Reading {
  std::string last_at;  // the call in progress
  bool done = false;
  bool answered = false;  // a line that ends the probe (fail, nolib, ...)
};

void apply(const std::vector<std::string>& f, const std::string& library,
           CudaAnswer& a, Reading& r) {
  const std::string_view kind = f[0];
  auto field = [&](std::size_t i) { return i < f.size() ? f[i] : ""; };
  auto number = [&](std::size_t i) { return std::atoi(field(i).c_str()); };
  if (kind == calls::kAt) {
    r.last_at = field(1);
  } else if (kind == calls::kVersion) {
    a.driver_api_version = number(1);
  } else if (kind == calls::kCount) {
    a.device_count = number(1);
  } else if (kind == calls::kDevice) {
    a.devices.push_back({number(1), field(2), false});
  } else if (kind == calls::kDeviceOk) {
    if (!a.devices.empty()) a.devices.back().ok = true;
  } else if (kind == calls::kDone) {
    r.done = true;
  } else if (kind == calls::kLoadFailed) {
    r.answered = true;
    a.outcome = CudaOutcome::kLibraryMissing;
    // dlerror's text names the file itself ("<name>: cannot open shared
    // object file: ..."); said once is enough.
    std::string why = field(1);
    if (why.rfind(library + ": ", 0) == 0) why.erase(0, library.size() + 2);
    a.message =
        "cannot load " + terminal_safe(library) + ": " + terminal_safe(why);
  } else if (kind == calls::kMissing) {
    r.answered = true;
    a.outcome = CudaOutcome::kFailed;
    a.message = terminal_safe(library) +
                " lacks driver API symbols: " + terminal_safe(field(1));
  } else if (kind == calls::kMismatch) {
    r.answered = true;
    a.outcome = CudaOutcome::kFailed;
    a.failed_call = field(1);
    a.message =
        a.failed_call + ": the bytes read back differ from those written";
  } else if (kind == calls::kFailed) {
    r.answered = true;
    a.failed_call = field(1);
    a.error_code = number(2);
    a.error_name = field(3);
    a.error_text = field(4);
    a.outcome = outcome_of(a.error_code);
    const std::string name =
        a.error_name.empty() ? "CUresult" : terminal_safe(a.error_name);
    a.message = terminal_safe(a.failed_call) + ": " + name + " (" +
                std::to_string(a.error_code) + ")";
    if (!a.error_text.empty()) a.message += ": " + terminal_safe(a.error_text);
  }
}

// Reads whole lines from the pipe into the answer; false at end of file.
class LineReader {
 public:
  bool read(int fd, const std::string& library, CudaAnswer& a, Reading& r) {
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) return errno == EINTR || errno == EAGAIN;
    if (n == 0) return false;
    const std::size_t room = kMaxOutput - std::min(kMaxOutput, seen_);
    seen_ += static_cast<std::size_t>(n);
    pending_.append(buf, std::min(room, static_cast<std::size_t>(n)));
    std::size_t nl;
    while ((nl = pending_.find('\n')) != std::string::npos) {
      apply(calls::split_line(std::string_view(pending_).substr(0, nl)),
            library, a, r);
      pending_.erase(0, nl + 1);
    }
    return true;
  }

 private:
  std::string pending_;
  std::size_t seen_ = 0;
};

// True once `pid` has exited; it stays a zombie (WNOWAIT), so its process
// group's id cannot be reused until it is reaped.
bool child_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info,
                  WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

// Reads what the exited child left in the pipe, without waiting for an end
// of file that a process it left behind may hold off for ever.
void drain(int fd, const std::string& library, CudaAnswer& a, Reading& r,
           LineReader& lines) {
  for (std::size_t reads = 0; reads < kMaxOutput / 1024; ++reads) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return;
    if (!lines.read(fd, library, a, r)) return;
  }
}

// After SIGKILL the child still has to leave the kernel driver, which tears
// its contexts down (130-150 ms on an H200 with driver 580); one stuck in
// the driver (state D, a wedged GPU) never leaves, and waiting on it would
// hang gpunode with it.
constexpr auto kKillGrace = std::chrono::seconds(2);

// Waits for the child to exit until `deadline`, SIGKILLs its group after
// that (or on an interrupt) and waits kKillGrace more. False when it could not
// be reaped: then it is stuck in the kernel, where no signal reaches it.
bool reap(pid_t pid, Clock::time_point deadline, bool& killed, int& status) {
  Clock::time_point give_up = Clock::time_point::max();
  if (killed) give_up = Clock::now() + kKillGrace;
  for (;;) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return true;
    if (got < 0 && errno != EINTR) return false;
    const auto now = Clock::now();
    if (now >= give_up) return false;
    if (!killed && (now >= deadline || stop_requested())) {
      ::kill(-pid, SIGKILL);
      killed = true;
      give_up = now + kKillGrace;
    }
    ::usleep(1000);
  }
}

void finish(CudaAnswer& a, const Reading& r, int status, bool timed_out,
            bool stopped, std::chrono::milliseconds timeout) {
  const std::string where = r.last_at.empty() ? "the CUDA probe" : r.last_at;
  if (r.answered) return;
  if (stopped) {
    a.outcome = CudaOutcome::kFailed;
    a.failed_call = r.last_at;
    a.message = "interrupted (" + signal_name(interrupted()) + ") in " +
                terminal_safe(where);
  } else if (timed_out) {
    a.outcome = CudaOutcome::kTimedOut;
    a.failed_call = r.last_at;
    a.message = terminal_safe(where) + " did not return within " +
                duration_text(timeout);
  } else if (WIFSIGNALED(status)) {
    a.outcome = CudaOutcome::kCrashed;
    a.failed_call = r.last_at;
    a.message = terminal_safe(where) + " crashed (" +
                signal_name(WTERMSIG(status)) + ")";
  } else if (r.done && a.device_count == 0) {
    // cuInit answers CUDA_ERROR_NO_DEVICE itself on a host without GPUs;
    // a count of 0 after a good cuInit means the same.
    a.outcome = CudaOutcome::kNoDevice;
    a.message = "cuDeviceGetCount: no CUDA device";
  } else if (r.done) {
    a.outcome = CudaOutcome::kOk;
  } else {
    a.outcome = CudaOutcome::kFailed;
    a.failed_call = r.last_at;
    a.message = "the CUDA probe ended (exit code " +
                std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                ") without an answer, in " + terminal_safe(where);
  }
}

}  // namespace

const char* cuda_outcome_name(CudaOutcome outcome) {
  switch (outcome) {
    case CudaOutcome::kOk:
      return "ok";
    case CudaOutcome::kLibraryMissing:
      return "library-missing";
    case CudaOutcome::kSystemNotReady:
      return "system-not-ready";
    case CudaOutcome::kDriverMismatch:
      return "driver-mismatch";
    case CudaOutcome::kNoDevice:
      return "no-device";
    case CudaOutcome::kUnknown:
      return "unknown";
    case CudaOutcome::kFailed:
      return "failed";
    case CudaOutcome::kTimedOut:
      return "timed-out";
    case CudaOutcome::kCrashed:
      return "crashed";
  }
  return "failed";
}

std::string cuda_version_text(int driver_api_version) {
  if (driver_api_version <= 0) return "";
  // cuda.h's CUDA_VERSION encoding: 1000 * major + 10 * minor.
  return std::to_string(driver_api_version / 1000) + "." +
         std::to_string(driver_api_version % 1000 / 10);
}

CudaAnswer probe_cuda(const std::string& library,
                      std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  CudaAnswer a;
  int ends[2];
  // O_CLOEXEC: a program another thread starts meanwhile must not hold the
  // write end, or the end of file would never come.
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    a.message = std::string("cannot start the CUDA probe: pipe: ") +
                std::strerror(errno);
    return a;
  }
  UniqueFd read_end(ends[0]);
  UniqueFd write_end(ends[1]);
  const pid_t pid = ::fork();
  if (pid < 0) {
    a.message = std::string("cannot start the CUDA probe: fork: ") +
                std::strerror(errno);
    return a;
  }
  if (pid == 0) {
    // A group of its own, so that whatever libcuda starts is ended with it.
    ::setpgid(0, 0);
    read_end.reset();
    calls::run_and_exit(library, write_end.get());
  }
  // Also here, so that the group exists before any kill(-pid) below.
  ::setpgid(pid, pid);
  write_end.reset();
  // Woken when the child exits (pidfd, Linux 5.3+; without it the tick).
  const UniqueFd exit_fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  Reading r;
  LineReader lines;
  bool timed_out = false;
  bool stopped = false;
  bool exited = false;
  pollfd fds[2] = {{read_end.get(), POLLIN, 0}, {exit_fd.get(), POLLIN, 0}};
  for (;;) {
    if (child_exited(pid)) {
      exited = true;
      break;
    }
    if (stop_requested()) {
      stopped = true;
      break;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    const int n = ::poll(
        fds, 2,
        static_cast<int>(std::min<long long>(left.count() + 1, kTickMs)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0 || fds[0].revents == 0) continue;
    // At the end of the pipe, only the child's exit is left to wait for.
    if (!lines.read(read_end.get(), library, a, r)) fds[0].fd = -1;
  }
  if (exited) drain(read_end.get(), library, a, r, lines);
  // Ends the child on a timeout or interrupt, and in every case what it
  // left running: the child is alive or an unreaped zombie, so its group's
  // id is still its own.
  ::kill(-pid, SIGKILL);
  if (timed_out || stopped) ::kill(pid, SIGKILL);  // were setpgid to fail
  bool killed = timed_out || stopped;
  int status = 0;
  const bool reaped = reap(pid, deadline, killed, status);
  // Killed by reap: the wait above broke off (poll failed) and the child
  // then ran past the deadline.
  if (killed && !stopped && !timed_out) {
    (stop_requested() ? stopped : timed_out) = true;
  }
  finish(a, r, status, timed_out, stopped, timeout);
  if (!reaped) {
    a.message += "; its process (pid " + std::to_string(pid) +
                 ") did not end after SIGKILL: stuck in the kernel driver";
  }
  a.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() -
                                                                 start);
  return a;
}

}  // namespace gpunode
