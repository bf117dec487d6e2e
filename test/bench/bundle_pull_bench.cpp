// Benchmark: `gpunode bundle create --pull` against `skopeo copy` of the same
// ~200 MB image from a real registry on loopback (Debian's docker-registry),
// same run, with peak RSS (GNU time). Two skopeo destinations: `oci:` (one
// write of the image, the fair peer) and `oci-archive:` (a directory, then a
// tar of it: twice the writes, a flattering peer shown for comparison).
// gpunode does more than skopeo here: it also verifies the archive and lays
// out the bundle (copy + hashes).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
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

  // Two peers: skopeo to oci-archive: (it writes an OCI directory, then
  // tars it: two writes) and to oci: (the directory alone: one write, what
  // bundle create's own write is closest to). Which of the three runs first
  // alternates by round, so none always gets the colder cache.
  std::vector<double> ours, archive_peer, dir_peer;
  long ours_rss = 0, archive_rss = 0, dir_rss = 0;
  for (int i = 0; i < rounds; ++i) {
    const std::string n = std::to_string(i);
    auto run_ours = [&] {
      Timed o = timed({GPUNODE_SHIPPED_BINARY, "bundle", "create", "--out",
                       dir.path() + "/bundle-" + n, "--pull", ref,
                       "--insecure-registry", "--platform", "linux/amd64"});
      ours.push_back(o.seconds);
      ours_rss = std::max(ours_rss, o.max_rss_kib);
    };
    auto run_skopeo = [&](const std::string& dest, std::vector<double>& times,
                          long& rss) {
      Timed s = timed({"skopeo", "copy", "--src-tls-verify=false",
                       "--insecure-policy", "docker://" + ref, dest});
      times.push_back(s.seconds);
      rss = std::max(rss, s.max_rss_kib);
    };
    auto run_archive = [&] {
      run_skopeo("oci-archive:" + dir.path() + "/skopeo-" + n + ".tar",
                 archive_peer, archive_rss);
    };
    auto run_dir = [&] {
      run_skopeo("oci:" + dir.path() + "/skopeo-dir-" + n, dir_peer, dir_rss);
    };
    const std::vector<std::function<void()>> order{run_ours, run_archive,
                                                   run_dir};
    for (std::size_t k = 0; k < order.size(); ++k)
      order[(k + static_cast<std::size_t>(i)) % order.size()]();
  }
  const double o = median(ours), a = median(archive_peer), d = median(dir_peer);
  std::printf(
      "pull from a loopback registry, %.0f MB image, %d rounds (first runner "
      "rotates), medians:\n",
      static_cast<double>(built.bytes) / 1e6, rounds);
  std::printf(
      "  ours  gpunode bundle create --pull        %6.3f s  peak RSS %ld MiB  "
      "(one pass: pull, digest checks, bundle hashes)\n",
      o, ours_rss / 1024);
  std::printf(
      "  peer  skopeo copy docker:// oci:          %6.3f s  peak RSS %ld MiB  "
      "(ratio %.2f, goal <= 1.1; one write, the fair peer)\n",
      d, dir_rss / 1024, o / d);
  std::printf(
      "  peer  skopeo copy docker:// oci-archive:  %6.3f s  peak RSS %ld MiB  "
      "(ratio %.2f; writes a directory, then tars it)\n",
      a, archive_rss / 1024, o / a);
  return 0;
}
