// The seam between gpunode and the machine it runs on. Stages see only a
// Host: the file system (every path is a host path, resolved under --root),
// an argv-only process runner, and a clock. Tests substitute the clock and
// point the root at a fixture tree, so a 10-minute wait runs in microseconds.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpunode/result.hpp"

namespace gpunode {

struct FileInfo {
  enum class Type { kRegular, kDirectory, kOther };
  Type type = Type::kOther;
  std::uint64_t size = 0;
  unsigned mode = 0;  // permission bits
  unsigned uid = 0;   // owner
  std::chrono::system_clock::time_point mtime;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // The real path of a host path ("/etc/x" -> "<root>/etc/x"), with symbolic
  // links followed inside the root (an absolute link target is taken relative
  // to the root, never to the machine running gpunode).
  virtual std::string resolve(const std::string& host_path) const = 0;
  // resolve() of every component but the last: the real path of the entry
  // itself, so that an operation on it acts on a symbolic link, never on the
  // link's target (state files are replaced, locked and read that way).
  std::string resolve_entry(const std::string& host_path) const;
  virtual std::optional<FileInfo> stat(const std::string& host_path) const = 0;
  // True when the entry itself (its last component not followed) is a
  // symbolic link.
  virtual bool is_symlink(const std::string& host_path) const {
    (void)host_path;
    return false;
  }
  // Reads at most max_bytes; a larger file is an error, not a truncation.
  virtual Result<std::string> read_file(const std::string& host_path,
                                        std::size_t max_bytes) const = 0;
  virtual bool is_executable_file(const std::string& host_path) const = 0;
  virtual std::vector<std::string> list_dir(
      const std::string& host_path) const = 0;
  // mkdir -p; when it fails part-way, the directories it made are removed.
  virtual Result<void> create_directories(const std::string& host_path) = 0;
  // temp file (O_EXCL) + fsync + rename + fsync of the directory. The rename
  // replaces the entry itself: a symbolic link there is replaced, and its
  // target is never written.
  virtual Result<void> write_file_atomic(const std::string& host_path,
                                         const std::string& content,
                                         unsigned mode) = 0;
  // Bytes free to an unprivileged writer on the file system that holds
  // host_path (or its nearest existing parent); nullopt when unknown.
  virtual std::optional<std::uint64_t> free_bytes(
      const std::string& host_path) const {
    (void)host_path;
    return std::nullopt;
  }
};

// What is kept of each of a child's output streams. The largest output
// gpunode reads back is a manifest from `ctr content get`; "Client and
// registry implementations SHOULD expect to be able to support manifest
// pushes of at least 4 megabytes" (OCI distribution-spec, spec.md, "Pushing
// Manifests"), so twice that is room enough, and memory stays bounded however
// much a child prints (nvidia-smi printing 133 MB once took 408 MB).
inline constexpr std::size_t kMaxCapturedBytes = 8u << 20;

struct ProcessResult {
  int exit_code = -1;        // -1 when it did not exit normally
  int term_signal = 0;       // signal that ended it, if any
  bool not_found = false;    // the program is not on PATH
  bool timed_out = false;    // killed at the deadline
  bool interrupted = false;  // killed because gpunode was (interrupt.hpp)
  // run_uncut only: the child ran on past its patience, or past gpunode's
  // interrupt, and was waited for (never killed); its exit is its own.
  bool outlasted_patience = false;
  bool outlasted_interrupt = false;
  std::string spawn_error;           // errno text when it could not be started
  std::optional<Error> input_error;  // the input source failed (run_with_input)
  std::string out;
  std::string err;
  // The stream said more than kMaxCapturedBytes: what is kept is its start.
  bool out_cut = false;
  bool err_cut = false;
  bool succeeded() const {
    return exit_code == 0 && !not_found && !timed_out && !interrupted &&
           spawn_error.empty() && !input_error;
  }
};

// Why a child did not succeed, in one phrase for a message: "exit code 3:
// <first line it printed>", "killed by signal 9 (SIGKILL)", "timed out",
// "not found on PATH", ...; says when its output was cut. The one place that
// words a ProcessResult's failure.
std::string describe_failure(const ProcessResult& r);
// " (output cut at 8 MiB)" when a stream was cut, else "": for messages
// that quote a child's output themselves.
std::string cut_note(const ProcessResult& r);
// The first non-blank line of a child's output, trimmed and at most 300
// characters: what a message quotes of it.
std::string first_line_of(const std::string& text);

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  // argv[0] is looked up on PATH. Never a shell.
  virtual ProcessResult run(const std::vector<std::string>& argv,
                            std::chrono::milliseconds timeout) = 0;
  // Like run(), with the child's standard input fed from `next_chunk`:
  // called whenever the child can take more; an empty chunk ends the input,
  // an error kills the child and is returned in ProcessResult::input_error.
  using InputSource = std::function<Result<std::string_view>()>;
  virtual ProcessResult run_with_input(const std::vector<std::string>& argv,
                                       std::chrono::milliseconds timeout,
                                       const InputSource& next_chunk) {
    (void)argv, (void)timeout, (void)next_chunk;
    ProcessResult r;
    r.spawn_error = "this process runner cannot feed standard input";
    return r;
  }
  // What run_uncut tells its caller while it waits, once each (kSignalAgain
  // at every further signal).
  enum class UncutEvent { kSignal, kSignalAgain, kPastPatience };
  using UncutNotice = std::function<void(UncutEvent)>;
  // For a package manager's transaction, which must never be cut (killing
  // dpkg or rpm mid-way leaves packages half-installed; left alone, each
  // finishes or rolls back on its own). Like run(), but neither gpunode's
  // interrupt nor `patience` ends the child: gpunode waits for its exit,
  // telling `notice`. Its output goes to files, not pipes, so that even
  // gpunode's death does not end it (SIGPIPE). The caller holds a
  // SecondSignalHold (interrupt.hpp) so that a second Ctrl-C does not end
  // gpunode either. Runners that start no real processes run it as run().
  virtual ProcessResult run_uncut(const std::vector<std::string>& argv,
                                  std::chrono::milliseconds patience,
                                  const UncutNotice& notice) {
    (void)notice;
    return run(argv, patience);
  }
  // Where argv[0] would be found on PATH, if anywhere.
  virtual std::optional<std::string> which(const std::string& program) = 0;
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::system_clock::time_point now() const = 0;
  virtual std::chrono::steady_clock::time_point steady_now() const = 0;
  virtual void sleep_for(std::chrono::milliseconds d) = 0;
};

class Host {
 public:
  virtual ~Host() = default;
  virtual FileSystem& fs() = 0;
  virtual ProcessRunner& proc() = 0;
  virtual Clock& clock() = 0;
  virtual uid_t effective_uid() const = 0;
  virtual std::string hostname() const = 0;
};

}  // namespace gpunode
