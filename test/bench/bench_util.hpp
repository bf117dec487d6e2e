// What every benchmark here needs: medians, and a command's wall time with
// its peak RSS (GNU time's %M), run the same way for ours and the peer.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "oci_builder.hpp"
#include "test_support.hpp"

namespace gpunode::bench {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Timed {
  double seconds;
  long max_rss_kib;
  double cpu_seconds;  // user + system (GNU time's %U and %S)
};

// Exits the benchmark when the command fails: a failed run has no time.
inline Timed timed(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/usr/bin/time", "-f", "%M %U %S"});
  const auto t0 = std::chrono::steady_clock::now();
  test::Run r = test::run_with_sim(argv, {}, std::chrono::minutes(5));
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (r.exit_code != 0) {
    std::fprintf(stderr, "%s failed:\n%s", argv[3].c_str(), r.err.c_str());
    std::exit(1);
  }
  std::string err = r.err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  const std::string last = err.substr(err.rfind('\n') + 1);
  long rss = 0;
  double user = 0, sys = 0;
  std::sscanf(last.c_str(), "%ld %lf %lf", &rss, &user, &sys);
  return {s, rss, user + sys};
}

// A bundle under `dir` made by the real binary from one single-platform
// image whose layer is `layer_bytes`; exits the benchmark when that fails.
inline std::string one_image_bundle(const test::TempDir& dir,
                                    std::uint64_t layer_bytes) {
  const std::string archive = dir.path() + "/dp.tar";
  test::ImageSpec spec;
  spec.platforms = {"linux/amd64"};
  spec.layer_bytes = layer_bytes;
  test::build_image(archive, spec);
  const std::string bundle = dir.path() + "/bundle";
  test::Run made =
      test::run_gpunode({"bundle", "create", "--out", bundle, "--image-archive",
                         archive, "--created", "2026-11-29T00:00:00Z"});
  if (made.exit_code != 0) {
    std::fprintf(stderr, "bundle create failed:\n%s", made.err.c_str());
    std::exit(1);
  }
  return bundle;
}

}  // namespace gpunode::bench
