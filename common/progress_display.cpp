#include "gpunode/progress_display.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "gpunode/terminal_text.hpp"

namespace gpunode {
namespace {

using Time = std::chrono::steady_clock::time_point;
using Seconds = std::chrono::duration<double>;

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
// The rate is smoothed over about this long (an exponential moving average
// weighted by time, so it means the same whatever the interval): long
// enough that one slow read does not swing the ETA, short enough that a
// stick slowing down shows within seconds.
constexpr double kRateSeconds = 3.0;
// The bar's gauge, in columns between its brackets.
constexpr std::size_t kGauge = 20;

std::string mib(std::uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(1ull << 30));
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / double(1ull << 20));
  return buf;
}

std::string rate_text(double bytes_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB/s",
                bytes_per_second / double(1ull << 20));
  return buf;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

// A time still to come, in whole units ("10 s", "3 min", "2 h"): an
// estimate is never said more precisely than it is. Seconds round up, so
// a last fraction of one never reads "0 s"; minutes and hours round.
std::string left_text(double s) {
  const auto whole = [](double v) { return std::to_string(std::llround(v)); };
  if (s < 90)
    return std::to_string(static_cast<long long>(std::ceil(s))) + " s";
  if (s < 90 * 60) return whole(s / 60) + " min";
  return whole(s / 3600) + " h";
}

// Columns a UTF-8 string takes: one per code point (continuation bytes
// take none). terminal_safe's output is printable ASCII or valid UTF-8.
std::size_t columns(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// `s` cut to at most `width` columns, keeping its end (the end of a path
// or a ref names it best) behind "...", never splitting a code point.
std::string shorten(const std::string& s, std::size_t width) {
  if (columns(s) <= width) return s;
  if (width <= 3) return std::string(width, '.');
  std::size_t keep = width - 3;
  std::size_t start = s.size();
  while (start > 0 && keep > 0) {
    --start;
    if ((static_cast<unsigned char>(s[start]) & 0xC0) != 0x80) --keep;
  }
  return "..." + s.substr(start);
}

// "[########------------]": `done` of `total` as `inner` columns of '#'.
std::string gauge(std::uint64_t done, std::uint64_t total, std::size_t inner) {
  const std::size_t filled = static_cast<std::size_t>(
      std::min<long double>(inner, (long double)done * inner / total));
  return "[" + std::string(filled, '#') + std::string(inner - filled, '-') +
         "]";
}

std::string pad(std::string line, std::size_t width) {
  const std::size_t n = columns(line);
  if (n < width) line.append(width - n, ' ');
  return line;
}

class Display final : public Progress {
 public:
  Display(std::ostream& out, ProgressDisplayOptions o)
      : out_(out),
        style_(o.style),
        width_(std::max(o.width, 20u)),
        interval_(o.interval.count() > 0 ? o.interval
                  : o.style == ProgressStyle::kBar
                      ? std::chrono::milliseconds(100)
                      : std::chrono::milliseconds(5000)),
        clock_(o.clock ? std::move(o.clock)
                       : [] { return std::chrono::steady_clock::now(); }) {}

  ~Display() override {
    std::lock_guard<std::mutex> lock(m_);
    // Someone forgot finish(): at least give the terminal its line back.
    if (active_ && style_ == ProgressStyle::kBar) out_ << '\n' << std::flush;
  }

  void start(std::string_view task, std::string_view subject,
             std::uint64_t total_bytes) override {
    std::lock_guard<std::mutex> lock(m_);
    if (active_) end(true);
    const Time now = clock_();
    active_ = true;
    task_ = task;
    subject_ = subject;
    safe_subject_ = terminal_safe(subject);
    total_ = total_bytes;
    done_ = 0;
    rate_ = 0;
    started_ = sampled_at_ = now;
    sampled_done_ = 0;
    if (style_ != ProgressStyle::kLines) draw(now, "running");
    due_ = ns(now + interval_);
  }

  void add(std::uint64_t bytes) override {
    done_.fetch_add(bytes, std::memory_order_relaxed);
    // The fast path, taken by all but one call an interval: one atomic
    // add, one clock read, one atomic load; no lock.
    if (due_.load(std::memory_order_relaxed) == kNever) return;
    const Time now = clock_();
    if (ns(now) < due_.load(std::memory_order_relaxed)) return;
    std::unique_lock<std::mutex> lock(m_, std::try_to_lock);
    if (!lock || !active_ || ns(now) < due_) return;  // another thread draws
    sample(now);
    draw(now, "running");
    due_ = ns(now + interval_);
  }

  void finish(bool ok) override {
    std::lock_guard<std::mutex> lock(m_);
    if (active_) end(ok);
  }

 private:
  static std::int64_t ns(Time t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               t.time_since_epoch())
        .count();
  }

  void sample(Time now) {
    const double dt = Seconds(now - sampled_at_).count();
    if (dt <= 0) return;
    const std::uint64_t done = done_.load();
    const double instant = (done - sampled_done_) / dt;
    const double weight = rate_ == 0 ? 1.0 : 1.0 - std::exp(-dt / kRateSeconds);
    rate_ += weight * (instant - rate_);
    sampled_at_ = now;
    sampled_done_ = done;
  }

  // Seconds to go at the smoothed rate; negative: not known.
  double eta(std::uint64_t done) const {
    if (total_ == 0 || rate_ <= 0 || done > total_) return -1;
    return (total_ - done) / rate_;
  }

  void end(bool ok) {
    const Time now = clock_();
    const std::uint64_t done = done_.load();
    const double elapsed = Seconds(now - started_).count();
    // The whole piece's average: what the operator compares across runs.
    rate_ = elapsed > 0 ? done / elapsed : 0;
    draw(now, ok ? "done" : "failed");
    active_ = false;
    due_ = kNever;
  }

  // "1.2 GiB of 3.4 GiB (35%)", or "1.2 GiB" when the total is not known.
  std::string amount(std::uint64_t done, const char* of) const {
    std::string s = mib(done);
    if (total_ == 0) return s;
    const int pct =
        static_cast<int>(std::min<std::uint64_t>(100, done * 100 / total_));
    return s + of + mib(total_) +
           (style_ == ProgressStyle::kBar ? "  " : " (") + std::to_string(pct) +
           "%" + (style_ == ProgressStyle::kBar ? "" : ")");
  }

  void draw(Time now, const char* state) {
    const std::uint64_t done = done_.load();
    const double elapsed = Seconds(now - started_).count();
    const double left = eta(done);
    const std::string st = state;
    if (style_ == ProgressStyle::kJson) {
      nlohmann::json j{{"event", "progress"},   {"task", task_},
                       {"subject", subject_},   {"done_bytes", done},
                       {"total_bytes", total_}, {"bytes_per_second", rate_},
                       {"seconds", elapsed},    {"state", st}};
      j["eta_seconds"] = st == "done"                   ? nlohmann::json(0.0)
                         : st == "running" && left >= 0 ? nlohmann::json(left)
                                                        : nlohmann::json();
      out_ << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
           << '\n'
           << std::flush;
      return;
    }
    const std::string tag = "[" + terminal_safe(task_) + "] ";
    std::string stats;
    if (st == "running" && style_ == ProgressStyle::kBar) {
      stats = "  " + amount(done, " / ") + "  " + rate_text(rate_);
      if (left >= 0) stats += "  " + left_text(left) + " left";
    } else if (st == "running") {
      stats = ": " + amount(done, " of ") + ", " + rate_text(rate_);
      if (left >= 0) stats += ", about " + left_text(left) + " left";
    } else if (st == "done") {
      stats = ": done, " + mib(done) + " in " + seconds_text(elapsed) + ", " +
              rate_text(rate_);
    } else {
      stats = ": failed after " + seconds_text(elapsed) + ", " +
              amount(done, " of ") + " done";
    }
    if (style_ == ProgressStyle::kLines) {
      out_ << tag << safe_subject_ << stats << '\n' << std::flush;
      return;
    }
    // The bar stays one column short of the width: a line that fills the
    // last column makes some terminals wrap, and '\r' then redraws only
    // the wrapped part.
    const std::size_t usable = width_ - 1;
    if (st == "running" && total_ > 0) {
      // A gauge only where it fits beside the whole subject and the widest
      // numbers this task can show, so it neither comes and goes between
      // frames nor shortens the path: on a narrow terminal the words
      // matter more than the picture.
      const std::size_t widest_stats =
          columns("  1023.9 MiB / " + mib(total_) + "  100%  " +
                  rate_text(9999.9 * (1 << 20)) + "  88 min left");
      if (columns(tag) + columns(safe_subject_) + widest_stats + kGauge + 4 <=
          usable)
        stats = "  " + gauge(done, total_, kGauge) + stats;
    }
    const std::size_t fixed = columns(tag) + columns(stats);
    const std::string subject =
        fixed < usable ? shorten(safe_subject_, usable - fixed) : "";
    std::string line = shorten(tag + subject + stats, usable);
    out_ << '\r' << pad(std::move(line), usable);
    if (st != "running") out_ << '\n';
    out_ << std::flush;
  }

  std::ostream& out_;
  const ProgressStyle style_;
  const unsigned width_;
  const std::chrono::milliseconds interval_;
  const ProgressClock clock_;

  std::mutex m_;  // everything below but done_ and due_; one drawer at a time
  bool active_ = false;
  std::string task_, subject_, safe_subject_;
  std::uint64_t total_ = 0;
  Time started_, sampled_at_;
  std::uint64_t sampled_done_ = 0;
  double rate_ = 0;  // bytes per second, smoothed
  std::atomic<std::uint64_t> done_{0};
  std::atomic<std::int64_t> due_{kNever};  // next draw, ns on clock_
};

}  // namespace

std::unique_ptr<Progress> make_progress_display(
    std::ostream& out, ProgressDisplayOptions options) {
  return std::make_unique<Display>(out, std::move(options));
}

unsigned terminal_columns(int fd) {
  if (const char* env = std::getenv("COLUMNS"); env != nullptr) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n < 10000)
      return static_cast<unsigned>(n);
  }
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

std::unique_ptr<Progress> make_cli_progress(bool json, std::ostream& json_out,
                                            std::ostream& err) {
  ProgressDisplayOptions o;
  if (json) {
    o.style = ProgressStyle::kJson;
    return make_progress_display(json_out, o);
  }
  if (::isatty(STDERR_FILENO) == 1) {
    o.style = ProgressStyle::kBar;
    o.width = terminal_columns(STDERR_FILENO);
  }
  return make_progress_display(err, o);
}

}  // namespace gpunode
