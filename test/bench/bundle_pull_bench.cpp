// Benchmark: `gpunode bundle create --pull` against `skopeo copy` of the same
// ~200 MB image from a real registry on loopback (Debian's docker-registry),
// same run, with peak RSS (GNU time). gpunode does more than skopeo here: it
// also verifies the archive and lays out the bundle (copy + hashes).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "oci_builder.hpp"
#include "registry_fixture.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using Clock = std::chrono::steady_clock;

using gpunode::bench::median;
using gpunode::bench::timed;
using gpunode::bench::Timed;

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
    Timed o = timed({GPUNODE_SHIPPED_BINARY, "bundle", "create", "--out", out,
                     "--pull", ref, "--insecure-registry", "--platform",
                     "linux/amd64"});
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
      "(one pass: pull, digest checks, bundle hashes)\n",
      o, ours_rss / 1024);
  std::printf(
      "  peer  skopeo copy docker:// oci-archive:  %6.3f s  peak RSS %ld MiB  "
      "(ratio %.2f, goal <= 1.1)\n",
      s, peer_rss / 1024, o / s);
  return 0;
}
