// Progress from the real binary (gpunode/progress_display.hpp): "progress"
// events with --json that end at the bundle's byte total, plain lines when
// stderr is a pipe, and a bar redrawn with '\r' when it is a terminal (a
// pty from openpty, as a person's shell would give it).
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gpunode/bundle.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

extern char** environ;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// An unsigned bundle with one image; `create` is that run.
std::string make_bundle(const TempDir& tmp, Run* create = nullptr) {
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  Run c = run_gpunode({"bundle", "create", "--out", tmp.path() + "/bundle",
                       "--image-archive", tmp.path() + "/plugin.tar",
                       "--created", "2026-11-29T10:00:00Z"});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  if (create) *create = c;
  return tmp.path() + "/bundle";
}

std::uint64_t bundle_bytes(const std::string& bundle) {
  auto m = gpunode::bundle::parse_manifest(read_text(bundle + "/bundle.toml"),
                                           "bundle.toml");
  REQUIRE(m);
  std::uint64_t total = 0;
  for (const auto& f : m->files) total += f.size;
  return total;
}

std::uint64_t file_size(const std::string& path) {
  return std::filesystem::file_size(path);
}

}  // namespace

TEST_CASE("bundle verify --json: progress events end at the bundle's bytes",
          "[e2e][progress]") {
  TempDir tmp;
  const std::string bundle = make_bundle(tmp);
  Run r = run_gpunode({"bundle", "verify", bundle, "--insecure-skip-signature",
                       "--json", "--threads", "2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() >= 3);  // start, done, result
  std::vector<json> progress;
  for (const auto& l : lines) {
    const json j = json::parse(l);
    if (j["event"] == "progress") progress.push_back(j);
  }
  REQUIRE(progress.size() >= 2);
  const std::uint64_t total = bundle_bytes(bundle);
  CHECK(progress.front()["state"] == "running");
  CHECK(progress.front()["done_bytes"] == 0);
  for (const json& p : progress) {
    CHECK(p["task"] == "verify");
    CHECK(p["subject"] == bundle);
    CHECK(p["total_bytes"] == total);
  }
  CHECK(progress.back()["state"] == "done");
  CHECK(progress.back()["done_bytes"] == total);
  const json result = json::parse(lines.back());
  CHECK(result["event"] == "result");
  CHECK(result["bytes_hashed"] == total);
  // --json: no human progress lines beside the events.
  CHECK(r.err.find("[verify]") == std::string::npos);
}

TEST_CASE("bundle create and verify into a pipe: plain lines, no '\\r'",
          "[e2e][progress]") {
  TempDir tmp;
  Run create;
  const std::string bundle = make_bundle(tmp, &create);
  // The copies: the binary and the image archive, byte for byte.
  const std::uint64_t copied = file_size(bundle + "/bin/gpunode") +
                               file_size(tmp.path() + "/plugin.tar");
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f MiB", copied / double(1 << 20));
  CHECK(create.err.find('\r') == std::string::npos);
  CHECK_THAT(create.err,
             Catch::Contains("[create] " + bundle + ": done, " + mib + " in "));
  Run v =
      run_gpunode({"bundle", "verify", bundle, "--insecure-skip-signature"});
  INFO(v.err);
  REQUIRE(v.exit_code == 0);
  CHECK(v.out.empty());
  CHECK(v.err.find('\r') == std::string::npos);
  CHECK_THAT(v.err, Catch::Contains("[verify] " + bundle + ": done, "));

  // A failed verification says so in its progress line too.
  std::string image;
  for (const auto& e : std::filesystem::directory_iterator(bundle + "/images"))
    image = e.path().string();
  flip_byte(image, 1000);
  Run bad =
      run_gpunode({"bundle", "verify", bundle, "--insecure-skip-signature"});
  CHECK(bad.exit_code == 4);
  CHECK_THAT(bad.err, Catch::Contains("[verify] " + bundle + ": failed after"));
}

TEST_CASE(
    "bundle verify on a terminal: a bar redrawn with '\\r', then a "
    "final line",
    "[e2e][progress]") {
  TempDir tmp;
  const std::string bundle = make_bundle(tmp);
  int master = -1, slave = -1;
  REQUIRE(::openpty(&master, &slave, nullptr, nullptr, nullptr) == 0);
  // stdout stays a pipe-free /dev/null; stderr (and stdin) is the terminal.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, slave, STDIN_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                   O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, slave, STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, master);
  std::vector<std::string> args = {GPUNODE_BINARY, "bundle", "verify", bundle,
                                   "--insecure-skip-signature"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text = {"COLUMNS=100", "NO_COLOR=1",
                                       "PATH=/usr/bin:/bin"};
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, GPUNODE_BINARY, &actions, nullptr,
                                    argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(slave);
  REQUIRE(spawned == 0);
  // Read the terminal until the child has closed it (EIO on Linux once the
  // last slave descriptor is gone).
  std::string screen;
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 1000) < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > give_up) break;
    if (!(p.revents & (POLLIN | POLLHUP))) continue;
    char buf[4096];
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;
    screen.append(buf, static_cast<std::size_t>(n));
  }
  ::close(master);
  int status = 0;
  if (std::chrono::steady_clock::now() > give_up) kill_tree(pid, SIGKILL);
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO(screen);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The pty turns "\n" into "\r\n": the frames are what follows a '\r'
  // that does not start a line end.
  std::vector<std::string> frames;
  for (std::size_t at = screen.find('\r'); at != std::string::npos;
       at = screen.find('\r', at + 1)) {
    if (at + 1 < screen.size() && screen[at + 1] == '\n') continue;
    const std::size_t end = screen.find_first_of("\r", at + 1);
    frames.push_back(screen.substr(at + 1, end - at - 1));
  }
  REQUIRE(frames.size() >= 2);  // the start, the final one
  CHECK(frames.front().rfind("[verify] ", 0) == 0);
  CHECK(frames.front().size() == 99);  // COLUMNS=100, one short of it
  CHECK_THAT(frames.back(),
             Catch::StartsWith("[verify] " + bundle + ": done, "));
  CHECK_THAT(screen, Catch::Contains("bundle verify: ok"));
}
