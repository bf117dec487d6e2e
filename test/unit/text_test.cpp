// The shared text helpers (gpunode/text.hpp): every message that states a
// size or a list goes through them, so their edges are pinned here.
#include "gpunode/text.hpp"

#include <catch2/catch.hpp>

using gpunode::human_bytes;

TEST_CASE("human_bytes: each unit from its first byte, one decimal below GiB",
          "[text]") {
  CHECK(human_bytes(0) == "0 bytes");
  CHECK(human_bytes(1023) == "1023 bytes");
  CHECK(human_bytes(1024) == "1.0 KiB");
  CHECK(human_bytes(26997) == "26.4 KiB");
  CHECK(human_bytes((1ull << 20) - 1) == "1024.0 KiB");
  CHECK(human_bytes(1ull << 20) == "1.0 MiB");
  CHECK(human_bytes(162233958) == "154.7 MiB");
  CHECK(human_bytes(1ull << 30) == "1.00 GiB");
  CHECK(human_bytes(5ull << 40) == "5120.00 GiB");
}

TEST_CASE("join and trim_space", "[text]") {
  CHECK(gpunode::join({}) == "");
  CHECK(gpunode::join({"a"}) == "a");
  CHECK(gpunode::join({"a", "b", "c"}, ":") == "a:b:c");
  CHECK(gpunode::trim_space(" \t\r\nx y\n") == "x y");
  CHECK(gpunode::trim_space(" \n ") == "");
}
