// The OS seam itself: rooted paths and argv-only processes.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "gpunode/system_host.hpp"
#include "test_support.hpp"

using namespace gpunode;
using gpunode::test::TempDir;
using gpunode::test::write_text;

TEST_CASE("host paths resolve under the root, links included", "[host]") {
  TempDir t;
  auto fs = make_rooted_file_system(t.path());
  write_text(t.path() + "/usr/lib/real-runtime", "#!/bin/sh\n", 0755);
  REQUIRE(::symlink("/usr/lib/real-runtime",
                    (t.path() + "/usr/lib/abs-link").c_str()) == 0);
  REQUIRE(::symlink("real-runtime", (t.path() + "/usr/lib/rel-link").c_str()) ==
          0);
  ::mkdir((t.path() + "/usr/bin").c_str(), 0755);
  REQUIRE(::symlink("../lib/abs-link", (t.path() + "/usr/bin/chain").c_str()) ==
          0);
  REQUIRE(::symlink("/../../../../etc/passwd",
                    (t.path() + "/escape").c_str()) == 0);

  // An absolute link target means the tree's own /usr/lib, not the machine's.
  CHECK(fs->resolve("/usr/lib/abs-link") == t.path() + "/usr/lib/real-runtime");
  CHECK(fs->resolve("/usr/lib/rel-link") == t.path() + "/usr/lib/real-runtime");
  CHECK(fs->resolve("/usr/bin/chain") == t.path() + "/usr/lib/real-runtime");
  CHECK(fs->is_executable_file("/usr/bin/chain"));
  // ".." never climbs out of the root.
  CHECK(fs->resolve("/escape") == t.path() + "/etc/passwd");
  CHECK(fs->resolve("/../../etc/x") == t.path() + "/etc/x");
  CHECK_FALSE(fs->stat("/escape"));
}

TEST_CASE("a link loop does not hang resolution", "[host]") {
  TempDir t;
  auto fs = make_rooted_file_system(t.path());
  REQUIRE(::symlink("/b", (t.path() + "/a").c_str()) == 0);
  REQUIRE(::symlink("/a", (t.path() + "/b").c_str()) == 0);
  CHECK_FALSE(fs->is_executable_file("/a"));
  CHECK_FALSE(fs->stat("/a"));
}

TEST_CASE("reading refuses directories and files over the limit", "[host]") {
  TempDir t;
  auto fs = make_rooted_file_system(t.path());
  write_text(t.path() + "/etc/big", std::string(100, 'x'));
  CHECK(fs->read_file("/etc/big", 100).ok());
  auto big = fs->read_file("/etc/big", 99);
  REQUIRE_FALSE(big);
  CHECK_THAT(big.error().message, Catch::Contains("larger than 99 bytes"));
  auto dir = fs->read_file("/etc", 1000);
  REQUIRE_FALSE(dir);
  CHECK_THAT(dir.error().message, Catch::Contains("is a directory"));
  auto missing = fs->read_file("/etc/none", 1000);
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error().message, Catch::Contains("/etc/none"));
}

TEST_CASE("atomic writes replace the file whole and leave no temporary",
          "[host]") {
  TempDir t;
  auto fs = make_rooted_file_system(t.path());
  REQUIRE(fs->create_directories("/var/lib/x"));
  REQUIRE(fs->write_file_atomic("/var/lib/x/f", "one", 0600));
  REQUIRE(fs->write_file_atomic("/var/lib/x/f", "two", 0640));
  CHECK(gpunode::test::read_text(t.path() + "/var/lib/x/f") == "two");
  CHECK(fs->stat("/var/lib/x/f")->mode == 0640);
  CHECK(fs->list_dir("/var/lib/x") == std::vector<std::string>{"f"});
  // Into a directory that does not exist: an error, not a crash.
  CHECK_FALSE(fs->write_file_atomic("/nope/f", "x", 0600));
}

TEST_CASE("processes run from an argv, with output, exit code and timeout",
          "[host]") {
  auto proc = make_posix_process_runner();
  using namespace std::chrono_literals;
  auto ok = proc->run({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10s);
  CHECK(ok.exit_code == 3);
  CHECK(ok.out == "out\n");
  CHECK(ok.err == "err\n");
  // Arguments are passed as they are: no shell sees them.
  auto literal = proc->run({"echo", "$(id)", "; rm -rf /", "*"}, 10s);
  CHECK(literal.out == "$(id) ; rm -rf / *\n");
  auto missing = proc->run({"gpunode-no-such-program"}, 10s);
  CHECK(missing.not_found);
  CHECK_FALSE(missing.succeeded());
  // A timeout kills the program and what it started.
  auto slow = proc->run({"sh", "-c", "sleep 30 & sleep 30"}, 200ms);
  CHECK(slow.timed_out);
  CHECK_FALSE(slow.succeeded());
  CHECK(proc->which("sh"));
  CHECK_FALSE(proc->which("gpunode-no-such-program"));
}

TEST_CASE("standard input can be streamed to a program", "[host]") {
  auto proc = make_posix_process_runner();
  using namespace std::chrono_literals;
  std::string big(3 * 1024 * 1024, 'x');  // larger than any pipe buffer
  int calls = 0;
  auto r = proc->run_with_input(
      {"wc", "-c"}, 20s, [&]() -> Result<std::string_view> {
        return ++calls == 1 ? std::string_view(big) : std::string_view();
      });
  CHECK(r.succeeded());
  CHECK(r.out == std::to_string(big.size()) + "\n");

  // A program that stops reading early does not hang or kill us.
  auto early = proc->run_with_input(
      {"head", "-c", "10"}, 20s, [&]() -> Result<std::string_view> {
        return std::string_view(big);  // never ends by itself
      });
  CHECK(early.exit_code == 0);
  CHECK(early.out == std::string(10, 'x'));

  // A failing source stops the program and says why.
  auto failed =
      proc->run_with_input({"cat"}, 20s, []() -> Result<std::string_view> {
        return Error{ExitCode::kIntegrity, "image", "USB stick pulled", {}};
      });
  CHECK_FALSE(failed.succeeded());
  REQUIRE(failed.input_error);
  CHECK(failed.input_error->message == "USB stick pulled");
}

TEST_CASE("reading a FIFO or a directory fails at once, as invalid input",
          "[host]") {
  // Opening a FIFO for reading blocks until a writer comes: a FIFO where a
  // config file belongs used to hang the whole run here.
  TempDir t;
  auto fs = make_rooted_file_system(t.path());
  write_text(t.path() + "/etc/.keep", "");
  REQUIRE(::mkfifo((t.path() + "/etc/fifo").c_str(), 0644) == 0);
  auto fifo = fs->read_file("/etc/fifo", 1000);
  REQUIRE_FALSE(fifo);
  CHECK_THAT(fifo.error().message, Catch::Contains("/etc/fifo: it is a FIFO"));
  CHECK(fifo.error().exit == ExitCode::kUsage);
  auto dir = fs->read_file("/etc", 1000);
  REQUIRE_FALSE(dir);
  CHECK(dir.error().exit == ExitCode::kUsage);
}
