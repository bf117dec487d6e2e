// Item 4 of "Hardening": untrusted text cannot steer the terminal.
#include "gpunode/terminal_text.hpp"

#include <catch2/catch.hpp>
#include <sstream>

#include "gpunode/report.hpp"

using gpunode::terminal_safe;

TEST_CASE("terminal_safe escapes every control character and keeps text",
          "[terminal]") {
  CHECK(terminal_safe("plain text, / and \\ and ~") ==
        "plain text, / and \\ and ~");
  CHECK(terminal_safe("a\nb\tc\rd") == "a\\nb\\tc\\rd");
  CHECK(terminal_safe("\x1b[2K\x1b[1A") == "\\e[2K\\e[1A");
  CHECK(terminal_safe(std::string("nul\0bel\x07"
                                  "del\x7f",
                                  12)) == "nul\\x00bel\\x07del\\x7F");
  // C1 controls as UTF-8 (CSI is U+009B) and a lone 0x9B byte.
  CHECK(terminal_safe("x\xc2\x9b"
                      "2K") == "x\\u009B2K");
  CHECK(terminal_safe("x\x9b"
                      "2K") == "x\\x9B2K");
  // Valid UTF-8 stays, invalid sequences are escaped byte by byte.
  CHECK(terminal_safe("NVIDIA H200 \xc2\xb5s \xe2\x9c\x93 \xf0\x9f\x9a\x80") ==
        "NVIDIA H200 \xc2\xb5s \xe2\x9c\x93 \xf0\x9f\x9a\x80");
  CHECK(terminal_safe("\xc0\xaf") == "\\xC0\\xAF");           // overlong '/'
  CHECK(terminal_safe("\xed\xa0\x80") == "\\xED\\xA0\\x80");  // surrogate
  CHECK(terminal_safe("\xe2\x9c") == "\\xE2\\x9C");           // cut short
}

namespace {

struct FakeStage : gpunode::Stage {
  std::string_view name() const override { return "driver"; }
  std::string_view layer() const override { return "driver"; }
  std::string inputs(gpunode::Context&) const override { return {}; }
  gpunode::Check check(gpunode::Context&) override { return {}; }
  gpunode::Result<void> apply(gpunode::Context&,
                              const gpunode::Check&) override {
    return {};
  }
};

}  // namespace

TEST_CASE("every human line of the Reporter is escaped, JSON keeps the text",
          "[terminal][report]") {
  const std::string evil = "GPU\x1b[2K\nbundle verify: ok";
  std::ostringstream out, err;
  gpunode::Reporter r(out, err, /*json=*/true, /*color=*/false);
  r.set_details(true);
  FakeStage stage;
  gpunode::Check c;
  c.status = gpunode::CheckStatus::kBlocked;
  c.summary = evil;
  c.details = {evil};
  c.warnings = {evil};
  c.fix = evil;
  r.check(stage, c);
  c.status = gpunode::CheckStatus::kSatisfied;
  r.check(stage, c);
  c.action = evil;
  r.would_apply(stage, c);
  r.applying(stage, evil);
  r.applied(stage, c);
  r.skipped("smoke", evil);
  r.history("driver", evil);
  r.warning("driver", evil);
  r.info("driver", evil);
  r.error(gpunode::Error{gpunode::ExitCode::kBlocked, "driver", evil, evil});
  // Several problems: one a line, each escaped on its own.
  gpunode::Error several{gpunode::ExitCode::kIntegrity, "bundle",
                         "first\n" + evil, ""};
  several.problems = {"first", evil};
  r.error(several);
  r.result("install", gpunode::ExitCode::kBlocked, evil, {});
  const std::string text = err.str();
  INFO(text);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find("\nbundle verify") == std::string::npos);
  CHECK(text.find("GPU\\e[2K\\nbundle verify: ok") != std::string::npos);
  CHECK(text.find("[ERROR bundle] first\n  ") != std::string::npos);
  // The JSON lines carry the text as it was (JSON escapes it itself).
  CHECK(out.str().find("GPU\\u001b[2K\\nbundle verify: ok") !=
        std::string::npos);
}
