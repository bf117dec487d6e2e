// Trust anchors (issue 11): a key, or a directory above it, that someone
// other than root or the running user could write is refused, with the fix.
#include "gpunode/trust_anchor.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "test_support.hpp"

using namespace gpunode;
using gpunode::test::TempDir;
using gpunode::test::write_text;

TEST_CASE("trust anchors: loose modes and foreign owners are refused",
          "[bundle]") {
  TempDir t;
  const std::string dir = t.path() + "/keys";
  const std::string key = dir + "/k.pub";
  write_text(key, "key\n", 0644);
  REQUIRE(::chmod(dir.c_str(), 0755) == 0);
  CHECK(check_trust_anchor(key, "trusted key"));

  auto refused = [&](const std::string& fragment) {
    auto r = check_trust_anchor(key, "trusted key");
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == ExitCode::kCannotRun);
    CHECK_THAT(r.error().message, Catch::Contains("trusted key " + key +
                                                  " is not a trust anchor"));
    CHECK_THAT(r.error().message + " " + r.error().fix,
               Catch::Contains(fragment));
  };
  SECTION("the key world-writable") {
    REQUIRE(::chmod(key.c_str(), 0666) == 0);
    refused("chmod go-w " + key);
  }
  SECTION("the key group-writable") {
    REQUIRE(::chmod(key.c_str(), 0664) == 0);
    refused("is writable by its group");
  }
  SECTION("owned by another user") {
    REQUIRE(::chown(key.c_str(), 4321, 4321) == 0);
    refused("chown root " + key);
  }
  SECTION("a directory above it writable by others") {
    REQUIRE(::chmod(dir.c_str(), 0777) == 0);
    refused("chmod go-w " + dir);
  }
  SECTION("a sticky directory above it (like /tmp) is fine") {
    REQUIRE(::chmod(t.path().c_str(), 01777) == 0);
    CHECK(check_trust_anchor(key, "trusted key"));
  }
  SECTION("but a sticky world-writable directory as the anchor itself is not") {
    REQUIRE(::chmod(dir.c_str(), 01777) == 0);
    auto r = check_trust_anchor(dir, "trusted-keys directory");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().fix, Catch::Contains("chmod go-w " + dir));
  }
  SECTION("through a link, the target's directories count too") {
    const std::string other = t.path() + "/open";
    write_text(other + "/real.pub", "key\n", 0644);
    REQUIRE(::chmod(other.c_str(), 0777) == 0);
    const std::string link = dir + "/linked.pub";
    REQUIRE(::symlink((other + "/real.pub").c_str(), link.c_str()) == 0);
    auto r = check_trust_anchor(link, "trusted key");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().fix, Catch::Contains("chmod go-w " + other));
  }
}
