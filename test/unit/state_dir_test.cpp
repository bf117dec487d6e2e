// Items 1 and 2 of "Hardening", and the state dir's weak spots: gpunode's
// own files are never written through a link, the state dir must be beyond
// other users' reach, a failed mkdir -p leaves nothing, and the fix fits the
// errno and who runs it.
#include "gpunode/state_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>

#include "gpunode/fs_errors.hpp"
#include "gpunode/run_lock.hpp"
#include "gpunode/system_host.hpp"
#include "test_support.hpp"

using gpunode::ExitCode;
using gpunode::test::read_text;
using gpunode::test::TempDir;
using gpunode::test::write_text;

TEST_CASE("an atomic write replaces a link at the entry, in --root mode too",
          "[state][host]") {
  TempDir t;
  const std::string root = t.path() + "/root";
  REQUIRE(::mkdir(root.c_str(), 0755) == 0);
  auto fs = gpunode::make_rooted_file_system(root);
  REQUIRE(fs->create_directories("/var/lib/gpunode"));
  // An absolute link is taken inside the root: before the fix the write
  // landed on <root>/precious, the link's target.
  const std::string target = root + "/precious";
  write_text(target, "keep\n");
  const std::string entry = root + "/var/lib/gpunode/journal.json";
  REQUIRE(::symlink("/precious", entry.c_str()) == 0);
  CHECK(fs->is_symlink("/var/lib/gpunode/journal.json"));
  REQUIRE(fs->write_file_atomic("/var/lib/gpunode/journal.json", "{}", 0600));
  CHECK(read_text(target) == "keep\n");
  struct stat st {};
  REQUIRE(::lstat(entry.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK(read_text(entry) == "{}");
  CHECK_FALSE(fs->is_symlink("/var/lib/gpunode/journal.json"));
}

TEST_CASE("resolve_entry follows links on the way but not at the end",
          "[state][host]") {
  TempDir t;
  auto fs = gpunode::make_rooted_file_system(t.path());
  REQUIRE(fs->create_directories("/real/dir"));
  REQUIRE(::symlink("/real", (t.path() + "/via").c_str()) == 0);
  REQUIRE(::symlink("/etc/shadow", (t.path() + "/real/dir/f").c_str()) == 0);
  CHECK(fs->resolve_entry("/via/dir/f") == t.path() + "/real/dir/f");
  CHECK(fs->resolve("/via/dir/f") == t.path() + "/etc/shadow");
  CHECK(fs->resolve_entry("/via/dir/") == t.path() + "/real/dir");
}

TEST_CASE("the lock is never opened through a link", "[state][lock]") {
  TempDir t;
  auto fs = gpunode::make_rooted_file_system(t.path());
  REQUIRE(fs->create_directories("/state"));
  const std::string target = t.path() + "/precious";
  write_text(target, "keep\n");
  const std::string lock = t.path() + "/state/lock";

  SECTION("symbolic link") {
    REQUIRE(::symlink(target.c_str(), lock.c_str()) == 0);
    auto r = gpunode::RunLock::acquire(*fs, "/state");
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == ExitCode::kCannotRun);
    CHECK_THAT(r.error().message,
               Catch::Contains("/state/lock: it is a symbolic link"));
    CHECK_THAT(r.error().fix, Catch::Contains("sudo rm /state/lock"));
  }
  SECTION("hard link") {
    REQUIRE(::link(target.c_str(), lock.c_str()) == 0);
    auto r = gpunode::RunLock::acquire(*fs, "/state");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("has 2 names"));
  }
  CHECK(read_text(target) == "keep\n");
}

TEST_CASE("state dir safety: owners and modes of the dir and its parents",
          "[state]") {
  TempDir t;  // mkdtemp: 0700, ours
  auto fs = gpunode::make_rooted_file_system(t.path());
  REQUIRE(fs->create_directories("/var/lib/gpunode"));
  const std::string real = t.path() + "/var/lib/gpunode";
  CHECK(gpunode::check_state_dir_safe(*fs, "/var/lib/gpunode"));

  SECTION("group-writable state dir") {
    REQUIRE(::chmod(real.c_str(), 0775) == 0);
    auto r = gpunode::check_state_dir_safe(*fs, "/var/lib/gpunode");
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == ExitCode::kCannotRun);
    CHECK_THAT(r.error().message, Catch::Contains("writable by its group"));
    CHECK_THAT(r.error().fix, Catch::Contains("sudo chmod go-w " + real));
  }
  SECTION("a sticky world-writable parent (like /tmp) is fine") {
    REQUIRE(::chmod((t.path() + "/var").c_str(), 01777) == 0);
    CHECK(gpunode::check_state_dir_safe(*fs, "/var/lib/gpunode"));
  }
  SECTION("a sticky world-writable state dir is not") {
    REQUIRE(::chmod(real.c_str(), 01777) == 0);
    CHECK_FALSE(gpunode::check_state_dir_safe(*fs, "/var/lib/gpunode"));
  }
  if (::geteuid() == 0) {
    SECTION("a parent owned by another user") {
      REQUIRE(::chown((t.path() + "/var").c_str(), 65534, 65534) == 0);
      auto r = gpunode::check_state_dir_safe(*fs, "/var/lib/gpunode");
      REQUIRE_FALSE(r);
      CHECK_THAT(r.error().message,
                 Catch::Contains("/var is owned by uid 65534, not root"));
      CHECK_THAT(r.error().fix,
                 Catch::Contains("sudo chown root " + t.path() + "/var"));
    }
  }
  SECTION("a state dir not made yet is checked as far as it exists") {
    CHECK(gpunode::check_state_dir_safe(*fs, "/var/lib/gpunode/a/b"));
    REQUIRE(::chmod(real.c_str(), 0777) == 0);
    CHECK_FALSE(gpunode::check_state_dir_safe(*fs, "/var/lib/gpunode/a/b"));
  }
}

TEST_CASE("prepare_state_dir makes nothing under an unsafe parent", "[state]") {
  TempDir t;
  auto fs = gpunode::make_rooted_file_system(t.path());
  REQUIRE(fs->create_directories("/srv"));
  REQUIRE(::chmod((t.path() + "/srv").c_str(), 0777) == 0);
  auto r = gpunode::prepare_state_dir(*fs, "/srv/gpunode/state");
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kCannotRun);
  struct stat st {};
  CHECK(::lstat((t.path() + "/srv/gpunode").c_str(), &st) != 0);
}

TEST_CASE("a failed mkdir -p removes the directories it made", "[state]") {
  TempDir t;
  auto fs = gpunode::make_rooted_file_system(t.path());
  const std::string too_long(300, 'x');
  auto r = fs->create_directories("/a/b/" + too_long);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kCannotRun);
  CHECK_THAT(r.error().message,
             Catch::Contains("cannot create directory /a/b/"));
  struct stat st {};
  CHECK(::lstat((t.path() + "/a").c_str(), &st) != 0);
  // Directories that were there before stay.
  REQUIRE(fs->create_directories("/keep"));
  CHECK_FALSE(fs->create_directories("/keep/new/" + too_long));
  CHECK(::lstat((t.path() + "/keep").c_str(), &st) == 0);
  CHECK(::lstat((t.path() + "/keep/new").c_str(), &st) != 0);
  // A file in the way is named as such.
  write_text(t.path() + "/file", "x");
  auto file = fs->create_directories("/file/sub");
  REQUIRE_FALSE(file);
  CHECK_THAT(file.error().fix, Catch::Contains("is not a directory"));
}

TEST_CASE("the fix for a failed state write fits the errno and the user",
          "[state]") {
  using gpunode::state_write_fix;
  CHECK_THAT(
      state_write_fix(EROFS, 0, "/var/lib/gpunode"),
      Catch::Contains("mounted read-only") && !Catch::Contains("run as root"));
  CHECK_THAT(state_write_fix(EACCES, 0, "/var/lib/gpunode"),
             Catch::Contains("chattr -i") && !Catch::Contains("run as root"));
  CHECK_THAT(state_write_fix(EACCES, 1000, "/var/lib/gpunode"),
             Catch::Contains("run as root"));
  CHECK_THAT(state_write_fix(ENOSPC, 0, "/x"), Catch::Contains("free space"));
}
