// The progress renderers (gpunode/progress_display.hpp) under a fake clock:
// every frame, line and event is exact, and no test sleeps.
#include "gpunode/progress_display.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpunode/progress_piece.hpp"

using namespace gpunode;
using json = nlohmann::json;

namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

struct FakeClock {
  std::chrono::steady_clock::time_point t{};
  void at_ms(long ms) {
    t = std::chrono::steady_clock::time_point{} + std::chrono::milliseconds(ms);
  }
  ProgressClock fn() {
    return [this] { return t; };
  }
};

std::unique_ptr<Progress> display(std::ostream& out, FakeClock& clock,
                                  ProgressStyle style, unsigned width = 80) {
  ProgressDisplayOptions o;
  o.style = style;
  o.width = width;
  o.clock = clock.fn();
  return make_progress_display(out, o);
}

// The bar's frames: what each '\r' redrew (the last keeps its '\n').
std::vector<std::string> frames(const std::string& out) {
  std::vector<std::string> f;
  std::size_t at = 0;
  while ((at = out.find('\r', at)) != std::string::npos) {
    const std::size_t next = out.find('\r', at + 1);
    f.push_back(out.substr(
        at + 1, next == std::string::npos ? std::string::npos : next - at - 1));
    at = at + 1;
  }
  return f;
}

std::string padded(std::string s, std::size_t width = 79) {
  s.resize(width, ' ');
  return s;
}

std::vector<std::string> lines(const std::string& out) {
  std::vector<std::string> l;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) l.push_back(line);
  return l;
}

}  // namespace

TEST_CASE("progress bar: redrawn in place with bytes, percent, rate and ETA",
          "[progress]") {
  FakeClock clock;
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kBar, 100);
  p->start("verify", "/media/usb/gpunode-bundle", 100 * kMiB);
  clock.at_ms(50);
  p->add(10 * kMiB);  // not due yet: no frame
  clock.at_ms(100);
  p->add(10 * kMiB);
  clock.at_ms(200);
  p->add(20 * kMiB);
  clock.at_ms(2000);
  p->add(60 * kMiB);
  p->finish(true);
  const auto f = frames(out.str());
  REQUIRE(f.size() == 5);
  CHECK(f[0] == padded("[verify] /media/usb/gpunode-bundle  0.0 MiB / "
                       "100.0 MiB  0%  0.0 MiB/s",
                       99));
  CHECK(f[1] == padded("[verify] /media/usb/gpunode-bundle  20.0 MiB / "
                       "100.0 MiB  20%  200.0 MiB/s  1 s left",
                       99));
  CHECK(f[2] == padded("[verify] /media/usb/gpunode-bundle  40.0 MiB / "
                       "100.0 MiB  40%  200.0 MiB/s  1 s left",
                       99));
  // 60 MiB in 1.8 s (33.3 MiB/s), smoothed over ~3 s: 200 + (33.3 - 200) *
  // (1 - e^(-1.8/3)) = 124.8 MiB/s, between the old rate and the new.
  CHECK(f[3] == padded("[verify] /media/usb/gpunode-bundle  100.0 MiB / "
                       "100.0 MiB  100%  124.8 MiB/s  0 s left",
                       99));
  CHECK(f[4] == padded("[verify] /media/usb/gpunode-bundle: done, 100.0 MiB "
                       "in 2.0 s, 50.0 MiB/s",
                       99) +
                    "\n");
  CHECK(out.str().back() == '\n');
}

TEST_CASE("progress bar: at most ten redraws a second", "[progress]") {
  FakeClock clock;
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kBar);
  p->start("import", "nvidia/k8s-device-plugin", 0);
  for (int ms = 1; ms <= 1000; ++ms) {
    clock.at_ms(ms);
    p->add(1000);
  }
  // The start's frame and one per 100 ms.
  CHECK(frames(out.str()).size() == 11);
}

TEST_CASE("progress bar: a gauge where the width has room for it",
          "[progress]") {
  FakeClock clock;
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kBar, 120);
  p->start("import", "/media/usb/b", 100 * kMiB);
  clock.at_ms(1000);
  p->add(45 * kMiB);
  clock.at_ms(2000);
  p->add(55 * kMiB);
  p->finish(true);
  const auto f = frames(out.str());
  REQUIRE(f.size() == 4);
  // 20 columns: 45% is 9 of them; the whole subject stays.
  CHECK(f[0] == padded("[import] /media/usb/b  [--------------------]  "
                       "0.0 MiB / 100.0 MiB  0%  0.0 MiB/s",
                       119));
  CHECK(f[1] == padded("[import] /media/usb/b  [#########-----------]  "
                       "45.0 MiB / 100.0 MiB  45%  45.0 MiB/s  2 s left",
                       119));
  // 55 MiB in the next second, smoothed over ~3 s: 45 + (55 - 45) *
  // (1 - e^(-1/3)) = 47.8 MiB/s.
  CHECK(f[2] == padded("[import] /media/usb/b  [####################]  "
                       "100.0 MiB / 100.0 MiB  100%  47.8 MiB/s  0 s left",
                       119));
  // The last frame says what happened, in words.
  CHECK(f[3] == padded("[import] /media/usb/b: done, 100.0 MiB in 2.0 s, "
                       "50.0 MiB/s",
                       119) +
                    "\n");
  // One column fewer than the widest numbers need: no gauge from the start,
  // so it never comes and goes between frames.
  std::ostringstream narrow;
  auto q = display(narrow, clock, ProgressStyle::kBar, 102);
  q->start("import", "/media/usb/b", 100 * kMiB);
  const auto g = frames(narrow.str());
  REQUIRE(g.size() == 1);
  CHECK(g[0].find('[', 1) == std::string::npos);
  std::ostringstream just;
  auto r = display(just, clock, ProgressStyle::kBar, 103);
  r->start("import", "/media/usb/b", 100 * kMiB);
  CHECK(frames(just.str()).at(0).find("[----") != std::string::npos);
}

TEST_CASE("progress bar: a long subject is shortened to fit the width",
          "[progress]") {
  FakeClock clock;
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kBar, 70);
  const std::string subject =
      "/media/usb/a-very-long-directory-name-for-the-bundle/gpunode-bundle";
  p->start("verify", subject, 10 * kMiB);
  const auto f = frames(out.str());
  REQUIRE(f.size() == 1);
  CHECK(f[0] ==
        "[verify] ...-bundle/gpunode-bundle  0.0 MiB / 10.0 MiB  0%  "
        "0.0 MiB/s");
  CHECK(f[0].size() == 69);
  // Too narrow for any of the subject: the line is still cut to the width.
  std::ostringstream narrow;
  auto q = display(narrow, clock, ProgressStyle::kBar, 20);
  q->start("verify", subject, 10 * kMiB);
  const auto g = frames(narrow.str());
  REQUIRE(g.size() == 1);
  CHECK(g[0].size() == 19);
  CHECK(g[0].rfind("...", 0) == 0);
}

TEST_CASE("progress: a hostile subject is escaped for people, kept in JSON",
          "[progress]") {
  FakeClock clock;
  const std::string subject = "evil\x1b[2J\nbundle verify: ok\r";
  for (auto style : {ProgressStyle::kBar, ProgressStyle::kLines}) {
    std::ostringstream out;
    auto p = display(out, clock, style, 200);
    p->start("verify", subject, kMiB);
    p->finish(true);
    const std::string text = out.str();
    INFO(text);
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find("evil\\e[2J\\nbundle verify: ok\\r") != std::string::npos);
    CHECK(lines(text).size() == 1);
  }
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kJson);
  p->start("verify", subject, kMiB);
  CHECK(json::parse(lines(out.str()).at(0))["subject"] == subject);
}

TEST_CASE("progress lines: no '\\r', one line an interval and one at the end",
          "[progress]") {
  FakeClock clock;
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kLines);
  p->start("verify", "/media/usb/gpunode-bundle", 1000 * kMiB);
  clock.at_ms(4900);
  p->add(490 * kMiB);
  CHECK(out.str().empty());
  clock.at_ms(5000);
  p->add(10 * kMiB);
  clock.at_ms(7000);
  p->add(500 * kMiB);
  clock.at_ms(8000);
  p->finish(true);
  CHECK(out.str().find('\r') == std::string::npos);
  CHECK(lines(out.str()) ==
        std::vector<std::string>{
            "[verify] /media/usb/gpunode-bundle: 500.0 MiB of 1000.0 MiB "
            "(50%), 100.0 MiB/s, about 5 s left",
            "[verify] /media/usb/gpunode-bundle: done, 1000.0 MiB in 8.0 s, "
            "125.0 MiB/s"});
}

TEST_CASE("progress: the rate is smoothed, the ETA follows it", "[progress]") {
  FakeClock clock;
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kLines);
  p->start("pull", "nvcr.io/nvidia/cuda:12", 200ull << 30);
  clock.at_ms(5000);
  p->add(500 * kMiB);  // 100 MiB/s: taken as it is (the first sample)
  clock.at_ms(10000);
  p->add(0);  // a stall: 100 MiB/s * e^(-5/3) = 18.9 MiB/s, not 0
  clock.at_ms(15000);
  p->add(1000 * kMiB);  // 200 MiB/s for 5 s
  const auto l = lines(out.str());
  REQUIRE(l.size() == 3);
  CHECK(l[0] ==
        "[pull] nvcr.io/nvidia/cuda:12: 500.0 MiB of 200.0 GiB (0%), "
        "100.0 MiB/s, about 34 min left");
  CHECK(l[1] ==
        "[pull] nvcr.io/nvidia/cuda:12: 500.0 MiB of 200.0 GiB (0%), "
        "18.9 MiB/s, about 3 h left");
  // 18.9 + (200 - 18.9) * (1 - e^(-5/3)) = 165.8 MiB/s.
  CHECK(l[2].find("1.5 GiB of 200.0 GiB (0%), 165.8 MiB/s") !=
        std::string::npos);
}

TEST_CASE("progress: an unknown total shows bytes and rate only",
          "[progress]") {
  FakeClock clock;
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kLines);
  p->start("import", "nvidia/k8s-device-plugin", 0);
  clock.at_ms(5000);
  p->add(50 * kMiB);
  clock.at_ms(6000);
  p->finish(false);
  CHECK(lines(out.str()) ==
        std::vector<std::string>{
            "[import] nvidia/k8s-device-plugin: 50.0 MiB, 10.0 MiB/s",
            "[import] nvidia/k8s-device-plugin: failed after 6.0 s, 50.0 MiB "
            "done"});
  std::ostringstream bar;
  auto b = display(bar, clock, ProgressStyle::kBar);
  b->start("import", "x", 0);
  CHECK(frames(bar.str()).at(0) == padded("[import] x  0.0 MiB  0.0 MiB/s"));
}

TEST_CASE("progress JSON: an event at start, each interval and the end",
          "[progress]") {
  FakeClock clock;
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kJson);
  p->start("verify", "/b", 1000 * kMiB);
  clock.at_ms(5000);
  p->add(500 * kMiB);
  clock.at_ms(6000);
  p->add(500 * kMiB);  // not due: no event
  clock.at_ms(8000);
  p->finish(true);
  const auto l = lines(out.str());
  REQUIRE(l.size() == 3);
  const json start = json::parse(l[0]);
  CHECK(start == json{{"event", "progress"},
                      {"task", "verify"},
                      {"subject", "/b"},
                      {"done_bytes", 0},
                      {"total_bytes", 1000 * kMiB},
                      {"bytes_per_second", 0.0},
                      {"seconds", 0.0},
                      {"eta_seconds", nullptr},
                      {"state", "running"}});
  const json mid = json::parse(l[1]);
  CHECK(mid["done_bytes"] == 500 * kMiB);
  CHECK(mid["bytes_per_second"] == 100.0 * kMiB);
  CHECK(mid["eta_seconds"] == 5.0);
  CHECK(mid["seconds"] == 5.0);
  const json end = json::parse(l[2]);
  CHECK(end["state"] == "done");
  CHECK(end["done_bytes"] == 1000 * kMiB);
  CHECK(end["bytes_per_second"] == 125.0 * kMiB);
  CHECK(end["eta_seconds"] == 0.0);
  CHECK(end["seconds"] == 8.0);
  // A failure: state failed, no ETA.
  std::ostringstream failed;
  auto q = display(failed, clock, ProgressStyle::kJson);
  q->start("pull", "r", 0);
  q->finish(false);
  const json f = json::parse(lines(failed.str()).at(1));
  CHECK(f["state"] == "failed");
  CHECK(f["eta_seconds"].is_null());
  CHECK(f["total_bytes"] == 0);
}

TEST_CASE(
    "progress: a new start ends the piece before it, and a piece left "
    "without done() fails",
    "[progress]") {
  FakeClock clock;
  std::ostringstream out;
  auto p = display(out, clock, ProgressStyle::kLines);
  {
    ProgressPiece piece(*p, "create", "/out", 20 * kMiB);
    clock.at_ms(1000);
    piece.add(10 * kMiB);
  }  // an early return: no done()
  p->start("a", "x", 0);
  clock.at_ms(3000);
  p->start("b", "y", 0);
  CHECK(lines(out.str()) ==
        std::vector<std::string>{
            "[create] /out: failed after 1.0 s, 10.0 MiB of 20.0 MiB (50%) "
            "done",
            "[a] x: done, 0.0 MiB in 2.0 s, 0.0 MiB/s"});
  // finish() with no piece running shows nothing.
  std::ostringstream idle;
  auto q = display(idle, clock, ProgressStyle::kBar);
  q->finish(true);
  q->add(5);
  CHECK(idle.str().empty());
}

TEST_CASE("progress: add() from many threads at once counts every byte",
          "[progress]") {
  std::ostringstream out;
  ProgressDisplayOptions o;
  o.style = ProgressStyle::kJson;
  o.interval = std::chrono::milliseconds(1);  // draw often, from any thread
  auto p = make_progress_display(out, o);
  constexpr int kThreads = 8, kAdds = 20000, kBytes = 3;
  p->start("verify", "/b", std::uint64_t{kThreads} * kAdds * kBytes);
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) p->add(kBytes);
    });
  for (auto& t : pool) t.join();
  p->finish(true);
  const auto l = lines(out.str());
  std::uint64_t last = 0;
  for (const auto& line : l) {
    const json j = json::parse(line);  // whole lines: one drawer at a time
    CHECK(j["done_bytes"].get<std::uint64_t>() >= last);
    last = j["done_bytes"];
  }
  CHECK(last == std::uint64_t{kThreads} * kAdds * kBytes);
  CHECK(json::parse(l.back())["state"] == "done");
}

TEST_CASE("progress: the terminal's width from COLUMNS, else 80",
          "[progress]") {
  const char* old = std::getenv("COLUMNS");
  const std::string saved = old ? old : "";
  ::setenv("COLUMNS", "123", 1);
  CHECK(terminal_columns(-1) == 123);
  ::setenv("COLUMNS", "12x", 1);
  CHECK(terminal_columns(-1) == 80);  // not a number; fd -1 has no size
  ::unsetenv("COLUMNS");
  CHECK(terminal_columns(-1) == 80);
  if (old) ::setenv("COLUMNS", saved.c_str(), 1);
}
