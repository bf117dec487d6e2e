// Spawns programs with an argv (posix_spawnp), never through a shell. The
// child gets /dev/null as stdin and its own process group, so a timeout kills
// it and anything it started; so does its exit: a job it left running in the
// background (holding its output open or not) is ended then. A package
// manager's transaction (run_uncut) is never killed: it is waited for.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "gpunode/crash_point.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/system_host.hpp"

extern char** environ;

namespace gpunode {
namespace {

// How long to read after the child exited: what it wrote is in the pipe
// already; this only lets a job it left behind finish a last line.
constexpr std::chrono::milliseconds kExitGrace{250};

// True once `pid` has exited; it stays a zombie (WNOWAIT) until reaped.
bool child_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info,
                  WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid;
}

// An uncut child's output file, into `text`: its start, up to
// kMaxCapturedBytes (`cut` says when there was more); then closed.
void read_back(int fd, std::string& text, bool& cut) {
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    const auto size = static_cast<std::size_t>(st.st_size);
    cut = size > kMaxCapturedBytes;
    text.resize(std::min(size, kMaxCapturedBytes));
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::pread(fd, &text[done], text.size() - done,
                                static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    text.resize(done);
  }
  ::close(fd);
}

class PosixProcessRunner : public ProcessRunner {
 public:
  ProcessResult run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override {
    return execute(argv, timeout, nullptr, nullptr);
  }

  ProcessResult run_uncut(const std::vector<std::string>& argv,
                          std::chrono::milliseconds patience,
                          const UncutNotice& notice) override {
    return execute(argv, patience, nullptr, &notice);
  }

  ProcessResult run_with_input(const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout,
                               const InputSource& next_chunk) override {
    // A child that exits before reading all its input would otherwise kill
    // gpunode with SIGPIPE on the next write; EPIPE is handled instead.
    // Children get default dispositions back (POSIX_SPAWN_SETSIGDEF).
    static std::once_flag ignore_sigpipe;
    std::call_once(ignore_sigpipe, [] { ::signal(SIGPIPE, SIG_IGN); });
    return execute(argv, timeout, &next_chunk, nullptr);
  }

  std::optional<std::string> which(const std::string& program) override {
    auto executable = [](const std::string& p) {
      struct stat st {};
      return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
             ::access(p.c_str(), X_OK) == 0;
    };
    if (program.find('/') != std::string::npos) {
      return executable(program) ? std::optional<std::string>(program)
                                 : std::nullopt;
    }
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    std::size_t i = 0;
    while (i <= dirs.size()) {
      std::size_t j = dirs.find(':', i);
      if (j == std::string::npos) j = dirs.size();
      std::string dir = dirs.substr(i, j - i);
      if (dir.empty()) dir = ".";
      std::string candidate = dir + "/" + program;
      if (executable(candidate)) return candidate;
      i = j + 1;
    }
    return std::nullopt;
  }

 private:
  // `uncut`: run_uncut's notice; the child is then never killed before it
  // exits, and writes its output to memory files (memfd_create(2)) that
  // outlive gpunode, instead of pipes.
  ProcessResult execute(const std::vector<std::string>& argv,
                        std::chrono::milliseconds timeout,
                        const InputSource* input, const UncutNotice* uncut) {
    ProcessResult result;
    if (argv.empty()) {
      result.spawn_error = "empty command";
      return result;
    }
    if (!which(argv[0])) {
      result.not_found = true;
      return result;
    }
    int out_pipe[2], err_pipe[2], in_pipe[2] = {-1, -1};
    if (input != nullptr && ::pipe2(in_pipe, O_CLOEXEC) != 0) {
      result.spawn_error = std::strerror(errno);
      return result;
    }
    if (uncut != nullptr) {
      // [0] is read back after the exit, [1] is the child's: one file.
      out_pipe[0] = out_pipe[1] = ::memfd_create("gpunode-out", MFD_CLOEXEC);
      err_pipe[0] = err_pipe[1] = ::memfd_create("gpunode-err", MFD_CLOEXEC);
      if (out_pipe[0] < 0 || err_pipe[0] < 0) {
        result.spawn_error = std::strerror(errno);
        if (out_pipe[0] >= 0) ::close(out_pipe[0]);
        if (err_pipe[0] >= 0) ::close(err_pipe[0]);
        return result;
      }
    } else if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
      result.spawn_error = std::strerror(errno);
      return result;
    } else if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      result.spawn_error = std::strerror(errno);
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
      return result;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (input != nullptr) {
      posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
    } else {
      posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    }
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
                                        POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);

    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);

    spdlog::debug("spawn: {}", fmt::join(argv, " "));
    pid_t pid = 0;
    int rc =
        ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (uncut == nullptr) {
      ::close(out_pipe[1]);
      ::close(err_pipe[1]);
    }
    if (input != nullptr) ::close(in_pipe[0]);
    if (rc != 0) {
      ::close(out_pipe[0]);
      ::close(err_pipe[0]);
      if (input != nullptr) ::close(in_pipe[1]);
      if (rc == ENOENT)
        result.not_found = true;
      else
        result.spawn_error = std::strerror(rc);
      return result;
    }
    for (const auto& a : argv) {
      if (a.empty() || a[0] == '-' || a.find('/') != std::string::npos)
        continue;
      crash_point("spawned:" + a, pid);
    }

    // Woken when the child exits (pidfd, Linux 5.3+; without it a short
    // tick): its exit, not the end of its output, ends the wait, since a
    // background job it started may hold the pipes open for hours.
    int exit_fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::optional<std::chrono::steady_clock::time_point> drain_until;
    // fds[2] is the child's stdin while we still have input for it; writes
    // are non-blocking so a child that stops reading cannot hang us.
    pollfd fds[4] = {{uncut ? -1 : out_pipe[0], POLLIN, 0},
                     {uncut ? -1 : err_pipe[0], POLLIN, 0},
                     {-1, POLLOUT, 0},
                     {exit_fd, POLLIN, 0}};
    if (input != nullptr) {
      ::fcntl(in_pipe[1], F_SETFL, ::fcntl(in_pipe[1], F_GETFL) | O_NONBLOCK);
      fds[2].fd = in_pipe[1];
    }
    std::string_view pending;
    int open_fds = uncut ? 0 : 2;
    int signals_seen = 0;  // uncut: the stop signals already told
    char buf[65536];
    auto close_input = [&]() {
      if (fds[2].fd >= 0) ::close(fds[2].fd);
      fds[2].fd = -1;
    };
    // Keeps the start of each stream, up to kMaxCapturedBytes; the rest is
    // read and dropped, so the child is never blocked on a full pipe.
    auto keep = [&](int stream, std::size_t n) {
      std::string& text = stream == 0 ? result.out : result.err;
      bool& cut = stream == 0 ? result.out_cut : result.err_cut;
      const std::size_t room = kMaxCapturedBytes - text.size();
      if (n > room) {
        cut = true;
        n = room;
      }
      text.append(buf, n);
    };
    for (;;) {
      if (!drain_until && child_exited(pid)) {
        drain_until = std::chrono::steady_clock::now() + kExitGrace;
        close_input();
        if (fds[3].fd >= 0) ::close(fds[3].fd);
        fds[3].fd = -1;
      }
      if (drain_until && open_fds == 0) break;
      const auto now = std::chrono::steady_clock::now();
      if (drain_until) {
        if (now >= *drain_until) {
          spdlog::debug(
              "{} exited; something it started still holds its "
              "output: ending its process group",
              argv[0]);
          break;
        }
      } else if (uncut != nullptr) {
        // Never cut: tell the caller what it waits through, and go on.
        if (now >= deadline && !result.outlasted_patience) {
          result.outlasted_patience = true;
          (*uncut)(UncutEvent::kPastPatience);
        }
        const int signals = stop_signals();
        if (interrupted() != 0 && signals > signals_seen) {
          (*uncut)(result.outlasted_interrupt ? UncutEvent::kSignalAgain
                                              : UncutEvent::kSignal);
          result.outlasted_interrupt = true;
          signals_seen = signals;
        }
      } else if (now >= deadline) {
        result.timed_out = true;
        ::kill(-pid, SIGKILL);
        break;
      } else if (stop_requested()) {
        // Stop the child rather than leave it running after we exit; the
        // caller undoes what it half did (e.g. a cut image import).
        result.interrupted = true;
        ::kill(-pid, SIGKILL);
        break;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          (drain_until ? *drain_until : deadline) - now);
      if (left.count() < 0) left = std::chrono::milliseconds(0);
      if (uncut != nullptr && result.outlasted_patience)
        left = std::chrono::milliseconds(1000);
      const long long tick = exit_fd < 0 && !drain_until ? 50 : 1000;
      int n =
          ::poll(fds, 4,
                 static_cast<int>(std::min<long long>(left.count() + 1, tick)));
      if (n < 0 && errno != EINTR) break;
      if (n <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
          continue;
        ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
        if (got > 0) {
          keep(i, static_cast<std::size_t>(got));
        } else if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
          ::close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
        }
      }
      if (fds[2].fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
        if (fds[2].revents & (POLLERR | POLLHUP)) {
          close_input();  // the child closed its stdin; its exit status says
                          // why
          continue;
        }
        if (pending.empty()) {
          auto chunk = (*input)();
          if (!chunk) {
            result.input_error = chunk.error();
            ::kill(-pid, SIGKILL);
            close_input();
            continue;
          }
          pending = *chunk;
          if (pending.empty()) {
            close_input();
            continue;
          }
        }
        ssize_t w = ::write(fds[2].fd, pending.data(), pending.size());
        if (w > 0) {
          pending.remove_prefix(static_cast<std::size_t>(w));
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
          close_input();
        }
      }
    }
    // The child is dead, or a zombie still holding its process group's id,
    // so this reaches only what it started (and never a recycled group):
    // nothing gpunode ran outlives the call.
    ::kill(-pid, SIGKILL);
    close_input();
    for (auto& f : fds) {
      if (f.fd >= 0) ::close(f.fd);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (uncut != nullptr) {
      read_back(out_pipe[0], result.out, result.out_cut);
      read_back(err_pipe[0], result.err, result.err_cut);
    }
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
    spdlog::debug("exit: {} code={} signal={} timed_out={}", argv[0],
                  result.exit_code, result.term_signal, result.timed_out);
    return result;
  }
};

}  // namespace

std::unique_ptr<ProcessRunner> make_posix_process_runner() {
  return std::make_unique<PosixProcessRunner>();
}

}  // namespace gpunode
