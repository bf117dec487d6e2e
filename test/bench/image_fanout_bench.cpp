// Benchmark (issue 11, item 7): verifying an image archive whose indexes
// repeat their children costs what the archive's size does. Archives of one
// image under four levels of indexes, each listing its child N times
// (N^4 paths to the manifest), for growing N: the time ratio between
// consecutive sizes must follow the size ratio (linear), not N^4.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "gpunode/image_archive.hpp"
#include "oci_docs.hpp"

using namespace gpunode::test;
using gpunode::bench::median;

namespace {

const std::string kRef = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";

std::string fan_out(std::size_t copies) {
  OciDocs d;
  const std::string l = d.blob(kOciLayerType, "layer tar");
  std::string child = d.manifest(d.config({digest_of_desc(l)}), {l});
  for (int i = 0; i < 4; ++i) child = d.index(child, copies);
  return d.tar(child, kRef);
}

}  // namespace

int main() {
  std::printf("fan-out image archives, 4 levels of N copies, medians of 5:\n");
  std::printf("  %6s  %10s  %10s  %10s  %10s\n", "N", "bytes", "seconds",
              "size ratio", "time ratio");
  double last_bytes = 0, last_s = 0;
  for (std::size_t copies : {500, 1000, 2000, 4000, 8000}) {
    const std::string tar = fan_out(copies);
    std::vector<double> times;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto r = gpunode::verify_image_archive_bytes(tar, "fan-out.tar", kRef,
                                                   "linux/amd64");
      times.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count());
      if (!r) {
        std::fprintf(stderr, "verify failed: %s\n", r.error().message.c_str());
        return 1;
      }
    }
    const double s = median(times);
    const double bytes = static_cast<double>(tar.size());
    if (last_bytes > 0) {
      std::printf("  %6zu  %10.0f  %10.4f  %10.2f  %10.2f\n", copies, bytes, s,
                  bytes / last_bytes, s / last_s);
    } else {
      std::printf("  %6zu  %10.0f  %10.4f  %10s  %10s\n", copies, bytes, s, "",
                  "");
    }
    last_bytes = bytes;
    last_s = s;
  }
  return 0;
}
