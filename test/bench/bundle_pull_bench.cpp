// Benchmark: `gpunode bundle create --pull` against `skopeo copy` of the same
// ~200 MB image from a real registry on loopback (Debian's docker-registry),
// same run, with peak RSS (GNU time). gpunode does more than skopeo here: it
// also verifies the archive and lays out the bundle (copy + hashes).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "oci_builder.hpp"
#include "registry_fixture.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using Clock = std::chrono::steady_clock;

namespace {

struct Timed {
  double seconds;
  long max_rss_kib;
};

Timed timed(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/usr/bin/time", "-f", "%M"});
  auto t0 = Clock::now();
  Run r = run_with_sim(argv, {}, std::chrono::minutes(5));
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (r.exit_code != 0) {
    std::fprintf(stderr, "%s failed:\n%s", argv[3].c_str(), r.err.c_str());
    std::exit(1);
  }
  std::string err = r.err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  return {s, std::atol(err.substr(err.rfind('\n') + 1).c_str())};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  if (!registry_available()) {
    std::fprintf(stderr,
                 "bundle_pull_bench: needs docker-registry and skopeo\n");
    return 1;
  }
  const char* rounds_env = std::getenv("GPUNODE_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 3;
  TempDir dir;
  const std::string archive = dir.path() + "/dp.tar";
  ImageSpec spec;
  spec.platforms = {"linux/amd64"};
  spec.layer_bytes = 200ull * 1024 * 1024;
  BuiltImage built = build_image(archive, spec);
  Registry registry;
  const std::string ref = registry.host() + "/nvidia/k8s-device-plugin:v0.19.3";
  registry.push(archive, "nvidia/k8s-device-plugin:v0.19.3");

  std::vector<double> ours, peer;
  long ours_rss = 0, peer_rss = 0;
  for (int i = 0; i < rounds; ++i) {
    const std::string out = dir.path() + "/bundle-" + std::to_string(i);
    Timed o = timed({GPUNODE_BINARY, "bundle", "create", "--out", out, "--pull",
                     ref, "--insecure-registry", "--platform", "linux/amd64"});
    const std::string copy =
        dir.path() + "/skopeo-" + std::to_string(i) + ".tar";
    Timed s =
        timed({"skopeo", "copy", "--src-tls-verify=false", "--insecure-policy",
               "docker://" + ref, "oci-archive:" + copy});
    ours.push_back(o.seconds);
    peer.push_back(s.seconds);
    ours_rss = std::max(ours_rss, o.max_rss_kib);
    peer_rss = std::max(peer_rss, s.max_rss_kib);
  }
  const double o = median(ours), s = median(peer);
  std::printf(
      "pull from a loopback registry, %.0f MB image, %d rounds, medians:\n",
      static_cast<double>(built.bytes) / 1e6, rounds);
  std::printf(
      "  ours  gpunode bundle create --pull  %6.3f s  peak RSS %ld MiB  "
      "(pull + verify + bundle layout)\n",
      o, ours_rss / 1024);
  std::printf(
      "  peer  skopeo copy docker:// oci-archive:  %6.3f s  peak RSS %ld MiB  "
      "(ratio %.2f, goal <= 1.1)\n",
      s, peer_rss / 1024, o / s);
  return 0;
}
