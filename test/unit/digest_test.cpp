// The one SHA-256/hex helper (common/include/gpunode/digest.hpp) and the owning
// descriptor (common/include/gpunode/unique_fd.hpp).
#include "gpunode/digest.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <utility>

#include "gpunode/unique_fd.hpp"

using namespace gpunode;

namespace {

constexpr const char* kAbc =
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

}  // namespace

TEST_CASE("sha256_hex matches the known digest of 'abc'", "[digest]") {
  CHECK(sha256_hex("abc") == kAbc);
}

TEST_CASE("hex_lower writes two lower-case digits per byte", "[digest]") {
  const unsigned char bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  CHECK(hex_lower(bytes, sizeof bytes) == "000fa0ff");
  CHECK(hex_lower(bytes, 0).empty());
}

TEST_CASE("Sha256 over pieces equals the digest of the whole, then restarts",
          "[digest]") {
  Sha256 sha;
  REQUIRE(sha.ok());
  sha.update("a", 1);
  sha.update("bc", 2);
  CHECK(sha.hex() == kAbc);
  // hex() started afresh: the next digest is of the next bytes only.
  sha.update("abc", 3);
  CHECK(sha.hex() == kAbc);
  CHECK(sha.hex() == sha256_hex(""));
}

TEST_CASE("Sha256::reset drops what was hashed so far", "[digest]") {
  Sha256 sha;
  sha.update("not this", 8);
  REQUIRE(sha.reset());
  sha.update("abc", 3);
  CHECK(sha.hex() == kAbc);
}

TEST_CASE("UniqueFd closes its descriptor once, and moves own it",
          "[unique_fd]") {
  int raw = -1;
  {
    UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    raw = fd.get();
    UniqueFd moved(std::move(fd));
    CHECK_FALSE(fd);  // NOLINT: the moved-from state is the point
    CHECK(moved.get() == raw);
    CHECK(is_open(raw));
  }
  CHECK_FALSE(is_open(raw));

  UniqueFd kept(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int released = kept.release();
  CHECK_FALSE(kept);
  CHECK(is_open(released));
  UniqueFd again(released);
  CHECK(again.close() == 0);
  CHECK_FALSE(is_open(released));
  CHECK(again.close() == 0);  // nothing held: nothing to close
}
