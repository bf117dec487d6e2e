// How far a long piece of work has come, in bytes: a registry pull, writing a
// bundle, verifying one, importing an image into containerd. The work calls a
// Progress; what the operator sees (a bar on a TTY, plain lines at intervals
// otherwise, "progress" events with --json) is the Progress's business, so
// the work never knows where its progress goes.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpunode {

class Progress {
 public:
  virtual ~Progress() = default;
  // A new piece of work: its kind ("pull", "create", "verify", "import"),
  // what it works on (an image ref, a bundle path), and its size in bytes
  // (0: not known in advance). Ends the previous piece, if any.
  virtual void start(std::string_view task, std::string_view subject,
                     std::uint64_t total_bytes) = 0;
  // More bytes done. May be called from several threads at once (verify).
  virtual void add(std::uint64_t bytes) = 0;
  // The piece is over (done or failed): the bar is cleared or completed.
  virtual void finish(bool ok) = 0;
};

// A Progress that shows nothing: the default wherever none is given.
Progress& no_progress();

}  // namespace gpunode
