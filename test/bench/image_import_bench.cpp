// Benchmark: gpunode's image stage (verify every blob, import, check, pin)
// against a bare `ctr images import` of the same ~200 MB archive, in the same
// run, each starting from an empty content store; then the rerun, which must
// only look. Prints medians and the ratio. Needs root and containerd.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "containerd_fixture.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using gpunode::bench::median;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main() {
  if (!containerd_available()) {
    std::fprintf(stderr,
                 "image_import_bench: needs root and Debian's containerd\n");
    return 1;
  }
  const char* rounds_env = std::getenv("GPUNODE_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 5;
  const std::size_t mib = 200;

  TempDir dir;
  const std::string archive = dir.path() + "/device-plugin.tar";
  ImageSpec spec;
  spec.platforms = {"linux/amd64"};
  spec.layer_bytes = mib * 1024 * 1024;
  BuiltImage built = build_image(archive, spec);
  const std::string root = dir.path() + "/node";
  make_host_tree(root, "good-v3");

  Containerd& ctd = Containerd::shared();
  const char* path = std::getenv("PATH");
  const std::vector<std::string> env{"PATH=" + ctd.bin_dir() + ":" +
                                     std::string(GPUNODE_TEST_SIM) +
                                     "/bin:" + (path ? path : "/usr/bin:/bin")};
  const std::vector<std::string> install{
      "install", "--root", root, "--only", "image", "--image-archive", archive};

  std::vector<double> bare, ours, rerun;
  for (int i = 0; i < rounds; ++i) {
    // Alternate the order so page-cache warmth favours neither side.
    for (int side = 0; side < 2; ++side) {
      const bool ours_now = (side == 0) == (i % 2 == 0);
      ctd.reset();
      auto t0 = Clock::now();
      if (ours_now) {
        Run r = run_gpunode(install, env);
        if (r.exit_code != 0) {
          std::fprintf(stderr, "gpunode failed:\n%s", r.err.c_str());
          return 1;
        }
        ours.push_back(seconds_since(t0));
        auto t1 = Clock::now();
        Run again = run_gpunode(install, env);
        if (again.exit_code != 0) return 1;
        rerun.push_back(seconds_since(t1));
      } else {
        auto r = ctd.ctr({"images", "import", "--base-name",
                          "nvcr.io/nvidia/k8s-device-plugin", archive});
        if (!r.succeeded()) {
          std::fprintf(stderr, "ctr import failed: %s\n", r.err.c_str());
          return 1;
        }
        bare.push_back(seconds_since(t0));
      }
    }
  }
  ctd.reset();
  const double b = median(bare), o = median(ours), s = median(rerun);
  std::printf("image import, %.0f MB archive (%s), %d rounds, medians:\n",
              static_cast<double>(built.bytes) / 1e6,
              built.index_digest.substr(0, 19).c_str(), rounds);
  std::printf("  peer  ctr images import            %7.3f s\n", b);
  std::printf(
      "  ours  gpunode install --only image %7.3f s  (verify + import + check "
      "+ pin)\n",
      o);
  std::printf("  ratio gpunode / ctr import         %7.3f   (goal <= 1.15)\n",
              o / b);
  std::printf(
      "  rerun gpunode (image in place)     %7.3f s  (%.1f%% of a bare "
      "import)\n",
      s, 100.0 * s / b);
  return 0;
}
