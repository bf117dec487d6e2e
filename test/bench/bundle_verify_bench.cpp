// Benchmark: `gpunode bundle verify` of a ~1 GiB bundle whose bulk is ONE
// image archive (warm page cache: this measures hashing, not the USB stick).
// The headline is verify's share of this machine's hashing limit, measured
// in the same run: `openssl speed -evp sha256 -bytes 1048576 -multi <cores>`
// (every core at once, so it is the limit for all of them together, not
// one core times the count). Debian's sha256sum has no SHA-NI and is no
// peer; `openssl dgst -sha256` over the same files (one core, SHA-NI) is
// shown as one. Verify checks two digests bundle.toml records for a
// multi-chunk file, each chunk's and the whole file's, so it hashes such a
// file twice: its rate is given for the bundle's bytes and for the bytes
// hashed. Other work on the machine lowers both (the load average is
// printed), so the share is also given per CPU-second against one core's
// limit (`openssl speed` without -multi), which other load barely moves.
// Then memory: the peak RSS of verifying 70,000 small files, against
// bundle.toml's size (goal: at most 64 MiB at any file count, issue 24).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "gpunode/bundle.hpp"
#include "many_files_bundle.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using Clock = std::chrono::steady_clock;

using gpunode::bench::median;
using gpunode::bench::timed;
using gpunode::bench::Timed;

// Bytes per second of SHA-256 over 1 MiB blocks, all cores together, as
// `openssl speed` measures it (its last line: "sha256  <N>k", N in 1000s
// of bytes per second). 0 when it cannot be read.
double hashing_limit(unsigned cores, int seconds) {
  Run r = run_with_sim(
      {"openssl", "speed", "-evp", "sha256", "-bytes", "1048576", "-seconds",
       std::to_string(seconds), "-multi", std::to_string(cores)},
      {}, std::chrono::seconds(seconds * 4 + 30));
  if (r.exit_code != 0) return 0;
  double rate = 0;
  std::size_t start = 0;
  while (start < r.out.size()) {
    std::size_t end = r.out.find('\n', start);
    if (end == std::string::npos) end = r.out.size();
    const std::string line = r.out.substr(start, end - start);
    if (line.rfind("sha256", 0) == 0 && !line.empty() && line.back() == 'k')
      rate = std::atof(line.substr(line.find_last_of(' ') + 1).c_str()) * 1e3;
    start = end + 1;
  }
  return rate;
}

std::string load_average() {
  std::string l = read_text("/proc/loadavg");
  return l.substr(0, l.find(' ', l.find(' ', l.find(' ') + 1) + 1));
}

int main() {
  const char* rounds_env = std::getenv("GPUNODE_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 3;
  TempDir dir;
  const std::string bundle =
      gpunode::bench::one_image_bundle(dir, 1000ull * 1024 * 1024);
  auto manifest = gpunode::bundle::parse_manifest(
      read_text(bundle + "/bundle.toml"), "bundle.toml");
  if (!manifest) return 1;
  std::vector<std::string> files;
  std::uint64_t bytes = 0, hashed = 0;
  for (const auto& f : manifest->files) {
    files.push_back(bundle + "/" + f.path);
    bytes += f.size;
    hashed += f.chunks.size() > 1 ? 2 * f.size : f.size;
  }
  std::vector<std::string> openssl{"openssl", "dgst", "-sha256"};
  openssl.insert(openssl.end(), files.begin(), files.end());

  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<double> ours, ssl, limit, core, ours_cpu;
  long ours_rss = 0, ssl_rss = 0;
  for (int i = 0; i < rounds; ++i) {
    Timed o = timed({GPUNODE_SHIPPED_BINARY, "bundle", "verify", bundle,
                     "--insecure-skip-signature"});
    Timed p = timed(openssl);
    limit.push_back(hashing_limit(cores, 3));
    core.push_back(hashing_limit(1, 3));
    ours_cpu.push_back(o.cpu_seconds);
    ours.push_back(o.seconds);
    ssl.push_back(p.seconds);
    ours_rss = std::max(ours_rss, o.max_rss_kib);
    ssl_rss = std::max(ssl_rss, p.max_rss_kib);
  }
  const double o = median(ours), p = median(ssl);
  const double lim = median(limit) / 1e9;
  const double one_core = median(core) / 1e9;
  const double gb = static_cast<double>(bytes) / 1e9;
  const double hashed_gb = static_cast<double>(hashed) / 1e9;
  const double per_cpu = hashed_gb / median(ours_cpu);
  std::printf(
      "bundle verify, %.2f GB in %zu files (one image archive), %d rounds, "
      "medians:\n",
      gb, files.size(), rounds);
  std::printf(
      "  limit openssl speed -evp sha256 -bytes 1048576 -multi %u: %5.2f GB/s"
      " (load average %s)\n",
      cores, lim, load_average().c_str());
  std::printf(
      "  ours  gpunode bundle verify     %6.3f s  %5.2f GB/s of the bundle, "
      "%5.2f GB/s hashed (chunks + whole files)  peak RSS %ld MiB\n"
      "        verify hashes at %.0f %% of this machine's hashing limit "
      "(goal >= 85 %%)\n",
      o, gb / o, hashed_gb / o, ours_rss / 1024,
      lim > 0 ? 100 * (hashed_gb / o) / lim : 0.0);
  std::printf(
      "  peer  openssl dgst -sha256      %6.3f s  %5.2f GB/s  peak RSS %ld MiB "
      " (one core; speedup %.2fx)\n",
      p, gb / p, ssl_rss / 1024, p / o);
  std::printf(
      "  per CPU-second: verify hashes %.2f GB per CPU-second (user + "
      "system); one core's limit (openssl speed, no -multi) %.2f GB/s: "
      "%.0f %%\n",
      per_cpu, one_core, one_core > 0 ? 100 * per_cpu / one_core : 0.0);

  // Memory at many files: the files are a few bytes each, so what is
  // measured is what verify keeps per file.
  const char* files_env = std::getenv("GPUNODE_BENCH_FILES");
  const std::size_t many =
      files_env ? std::max(1, std::atoi(files_env)) : 70000;
  ManyFilesBundle lots(many);
  const double toml_mib =
      static_cast<double>(read_text(lots.dir + "/bundle.toml").size()) /
      (1 << 20);
  std::vector<double> many_s;
  long many_rss = 0;
  for (int i = 0; i < rounds; ++i) {
    Timed t = timed({GPUNODE_SHIPPED_BINARY, "bundle", "verify", lots.dir,
                     "--trust-key", lots.pub});
    many_s.push_back(t.seconds);
    many_rss = std::max(many_rss, t.max_rss_kib);
  }
  std::printf(
      "bundle verify of %zu small files (signed), %d rounds:\n"
      "  ours  %6.3f s (median)  peak RSS %.1f MiB = %.2fx bundle.toml "
      "(%.1f MiB)  (goal <= 64 MiB)\n",
      many, rounds, median(many_s), many_rss / 1024.0,
      many_rss / 1024.0 / toml_mib, toml_mib);
  return 0;
}
