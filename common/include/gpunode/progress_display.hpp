// The Progress renderers (gpunode/progress.hpp): what the operator sees of a
// long piece of work. On a terminal, one line redrawn in place with '\r';
// into a pipe or a log, plain lines at intervals (a '\r' there would only
// garble the log); with --json, "progress" events (docs/json-events.md) and
// nothing for people. The clock is given, so tests drive time exactly.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>

#include "gpunode/progress.hpp"

namespace gpunode {

enum class ProgressStyle { kBar, kLines, kJson };

using ProgressClock = std::function<std::chrono::steady_clock::time_point()>;

struct ProgressDisplayOptions {
  ProgressStyle style = ProgressStyle::kLines;
  // The terminal's columns (kBar): the line never reaches the last column,
  // so the terminal does not wrap it.
  unsigned width = 80;
  // Between two redraws (kBar) or two lines / events (kLines, kJson).
  // Zero: the style's default (100 ms for the bar, 5 s otherwise).
  std::chrono::milliseconds interval{0};
  ProgressClock clock;  // empty: std::chrono::steady_clock::now
};

// Writes to `out`, which must outlive the result. add() may come from
// several threads: the count is atomic, and one thread at a time draws.
std::unique_ptr<Progress> make_progress_display(std::ostream& out,
                                                ProgressDisplayOptions options);

// The renderer a command line wants: kJson onto `json_out` with --json,
// else a bar on `err` when fd 2 is a terminal (width: COLUMNS, else
// TIOCGWINSZ, else 80), else plain lines on `err`.
std::unique_ptr<Progress> make_cli_progress(bool json, std::ostream& json_out,
                                            std::ostream& err);

// The width make_cli_progress uses: COLUMNS (a positive number), else the
// terminal's (TIOCGWINSZ on `fd`), else 80.
unsigned terminal_columns(int fd);

}  // namespace gpunode
