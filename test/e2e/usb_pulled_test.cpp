// The USB stick pulled mid-run: install --bundle is frozen at a point (the
// test-only STOP hook, common/include/gpunode/crash_point.hpp), the stick's
// files shrink or vanish, and the run goes on. It must name the file, exit
// non-zero, and leave nothing half-imported claiming to be complete; with
// the stick back, a rerun converges.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "sim_gpu_node.hpp"
#include "test_support.hpp"

using namespace gpunode::test;

namespace {

// Waits until `pid` is stopped (state T in /proc/PID/stat).
bool wait_stopped(pid_t pid) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() &&
        line[paren + 2] == 'T')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace

TEST_CASE(
    "a USB stick pulled mid-verify or mid-install is named, nothing "
    "half-imported is left, and a rerun converges",
    "[e2e][crash][bundle]") {
  if (!containerd_available()) FAIL("needs root and Debian's containerd");
  SimGpuNode node;
  const std::string stick = node.dir.path() + "/usb/gpunode-bundle";
  write_text(node.dir.path() + "/usb/.keep", "");
  Run made = run_gpunode({"bundle", "create", "--out", stick, "--image-archive",
                          node.archive, "--created", "2026-11-29T00:00:00Z"});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const std::string image = stick + "/images/k8s-device-plugin-v0.19.3.tar";
  const std::string kept = node.dir.path() + "/image-copy.tar";
  std::filesystem::copy_file(image, kept);

  struct Case {
    const char* point;
    const char* what;  // truncate | remove
    const char* expect;
    int exit;
  };
  const Case c = GENERATE(
      // Verify has opened every file; the image then reads short.
      Case{"bundle-verify:opened", "truncate",
           "images/k8s-device-plugin-v0.19.3.tar", 4},
      // The bundle verified, the image stage has not started: the image
      // file is gone when it opens it.
      Case{"check:image", "remove", "k8s-device-plugin-v0.19.3.tar", 2},
      // The image shrank between the verify and the import: the image
      // stage's own check before containerd sees a byte catches it.
      Case{"check:image", "truncate", "k8s-device-plugin-v0.19.3.tar", 4});
  INFO(c.what << " at " << c.point);

  std::vector<std::string> argv{GPUNODE_BINARY,
                                "install",
                                "--root",
                                node.root,
                                "--bundle",
                                stick,
                                "--insecure-skip-signature",
                                "--timeout",
                                "60s"};
  std::vector<std::string> env = node.env();
  env.push_back(std::string("GPUNODE_TEST_CRASH_AT=") + c.point);
  env.push_back("GPUNODE_TEST_CRASH_SIGNAL=STOP");
  Background run(argv, env);
  REQUIRE(wait_stopped(run.pid()));
  if (std::string(c.what) == "truncate")
    std::filesystem::resize_file(image, 4096);
  else
    std::filesystem::remove(image);
  ::kill(run.pid(), SIGCONT);
  Run r = run.wait();
  INFO(r.err);
  CHECK(r.exit_code == c.exit);
  CHECK_THAT(r.err, Catch::Contains(c.expect));
  // Nothing half-imported: containerd holds no record of the image.
  CHECK(image_line(node).empty());

  // The stick back in: the rerun converges.
  std::filesystem::remove(image);
  std::filesystem::copy_file(kept, image);
  Run again = run_with_sim(argv, node.env());
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(image_complete(node));
}
