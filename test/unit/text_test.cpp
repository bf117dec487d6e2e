// The shared text helpers (gpunode/text.hpp): every message that states a
// size or a list goes through them, so their edges are pinned here.
#include "gpunode/text.hpp"

#include <catch2/catch.hpp>

using gpunode::human_bytes;
using gpunode::shell_word;

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

TEST_CASE("quoted_value: short values whole, long ones cut with their size",
          "[text]") {
  using gpunode::kEchoLimit;
  using gpunode::quoted_value;
  CHECK(quoted_value("bogus") == "'bogus'");
  CHECK(quoted_value("") == "''");
  const std::string at_limit(kEchoLimit, 'a');
  CHECK(quoted_value(at_limit) == "'" + at_limit + "'");
  const std::string big(20000, 'x');
  CHECK(quoted_value(big) ==
        "'" + std::string(kEchoLimit, 'x') + "...' (20000 bytes)");
  // A two-byte character across the cut is kept whole or dropped whole.
  std::string utf8(kEchoLimit - 1, 'a');
  utf8 += "\xC3\xA9";  // é: bytes kEchoLimit-1 and kEchoLimit
  utf8 += std::string(10, 'b');
  CHECK(quoted_value(utf8) == "'" + std::string(kEchoLimit - 1, 'a') +
                                  "...' (" + std::to_string(utf8.size()) +
                                  " bytes)");
}

// Regression (independent try of issue 26): fix lines pasted a path with a
// space as two words.
TEST_CASE("shell_word quotes what a shell would split or expand", "[text]") {
  CHECK(shell_word("/var/lib/gpunode/lock") == "/var/lib/gpunode/lock");
  CHECK(shell_word("nvcr.io/nvidia/x:v0.19.3@sha256:ab") ==
        "nvcr.io/nvidia/x:v0.19.3@sha256:ab");
  CHECK(shell_word("/media/my stick/dp.tar") == "'/media/my stick/dp.tar'");
  CHECK(shell_word("it's") == "'it'\\''s'");
  CHECK(shell_word("$(reboot)") == "'$(reboot)'");
  CHECK(shell_word("a;b") == "'a;b'");
  CHECK(shell_word("") == "''");
}
