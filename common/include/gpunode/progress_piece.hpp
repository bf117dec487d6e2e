// One piece of work's progress, started by the constructor and ended on
// every way out: done() on success, else finish(false) when it goes out of
// scope, so an early error return never leaves a bar half drawn.
#pragma once

#include <cstdint>
#include <string_view>

#include "gpunode/progress.hpp"

namespace gpunode {

class ProgressPiece {
 public:
  ProgressPiece(Progress& progress, std::string_view task,
                std::string_view subject, std::uint64_t total_bytes)
      : progress_(progress) {
    progress_.start(task, subject, total_bytes);
  }
  ~ProgressPiece() {
    if (!ended_) progress_.finish(false);
  }
  ProgressPiece(const ProgressPiece&) = delete;
  ProgressPiece& operator=(const ProgressPiece&) = delete;

  void add(std::uint64_t bytes) { progress_.add(bytes); }
  void done() {
    ended_ = true;
    progress_.finish(true);
  }

 private:
  Progress& progress_;
  bool ended_ = false;
};

}  // namespace gpunode
