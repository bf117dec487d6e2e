// Benchmark: what showing progress costs `bundle verify`. The same bundle
// (one ~512 MiB image archive; GPUNODE_BENCH_MIB to change it) verified in
// this process, rounds interleaved, with the real renderer (the bar, drawn
// into /dev/null at its 10 redraws a second, and the JSON events) against
// no_progress(). Every hashed 64 KiB block calls add() from its thread, so
// this is the price of the atomic count and the clock read it costs.
// Warm page cache: this measures the hashing path, not the stick.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "gpunode/bundle.hpp"
#include "gpunode/progress_display.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

using namespace gpunode;
using namespace gpunode::test;
using gpunode::bench::median;

namespace {

// Seconds one verification takes with `progress`; exits on a failure.
double verify_seconds(const std::string& bundle, Progress& progress) {
  bundle::VerifyOptions options;
  options.insecure_skip_signature = true;
  options.progress = &progress;
  const auto t0 = std::chrono::steady_clock::now();
  auto r = bundle::verify_bundle(bundle, options);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!r) {
    std::fprintf(stderr, "verify failed: %s\n", r.error().message.c_str());
    std::exit(1);
  }
  return s;
}

}  // namespace

int main() {
  const char* rounds_env = std::getenv("GPUNODE_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 5;
  const char* mib_env = std::getenv("GPUNODE_BENCH_MIB");
  const std::uint64_t mib = mib_env ? std::max(1, std::atoi(mib_env)) : 512;
  TempDir dir;
  const std::string bundle = gpunode::bench::one_image_bundle(dir, mib << 20);
  std::ofstream null("/dev/null");
  ProgressDisplayOptions bar;
  bar.style = ProgressStyle::kBar;
  auto bar_display = make_progress_display(null, bar);
  ProgressDisplayOptions events;
  events.style = ProgressStyle::kJson;
  auto json_display = make_progress_display(null, events);

  verify_seconds(bundle, no_progress());  // warms the page cache
  std::vector<double> none, with_bar, with_json;
  for (int i = 0; i < rounds; ++i) {
    none.push_back(verify_seconds(bundle, no_progress()));
    with_bar.push_back(verify_seconds(bundle, *bar_display));
    with_json.push_back(verify_seconds(bundle, *json_display));
  }
  const double n = median(none), b = median(with_bar), j = median(with_json);
  std::printf("bundle verify of %llu MiB (in process), %d rounds, medians:\n",
              static_cast<unsigned long long>(mib), rounds);
  std::printf("  peer  no_progress()          %6.3f s\n", n);
  std::printf(
      "  ours  progress bar (10/s)    %6.3f s  (ratio %.3f, goal <= 1.02)\n", b,
      b / n);
  std::printf(
      "  ours  --json progress events %6.3f s  (ratio %.3f, goal <= 1.02)\n", j,
      j / n);
  return 0;
}
