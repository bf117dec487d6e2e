// "Did you mean": a mistyped subcommand or flag is named, with the closest
// known word (issue 11: `gpunode instal` did not say which word was wrong).
#include "cli/suggest.hpp"

#include <catch2/catch.hpp>
#include <sstream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"

using namespace gpunode;

namespace {

struct Cli {
  std::ostringstream out, err;
  int code = 0;
  explicit Cli(std::vector<std::string> args) {
    args.insert(args.begin(), "gpunode");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    code = run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  }
};

}  // namespace

TEST_CASE("closest_word: a typo's closest candidate, or none", "[cli]") {
  const std::vector<std::string> commands = {"install", "plan", "status",
                                             "uninstall", "bundle"};
  CHECK(closest_word("instal", commands) == "install");
  CHECK(closest_word("isntall", commands) == "install");  // a swap is one edit
  CHECK(closest_word("stauts", commands) == "status");
  CHECK(closest_word("bundel", commands) == "bundle");
  CHECK(closest_word("x", commands).empty());
  CHECK(closest_word("deploy", commands).empty());
  CHECK(closest_word(std::string(10000, 'a'), commands).empty());
}

TEST_CASE("an unknown subcommand or flag is named, with the closest one",
          "[cli]") {
  SECTION("top-level command") {
    Cli c({"instal"});
    CHECK(c.code == 2);
    CHECK_THAT(c.err.str(), Catch::Contains("unknown command 'instal' (did "
                                            "you mean 'install'?)"));
  }
  SECTION("a command of bundle") {
    Cli c({"bundle", "verfy", "/nowhere"});
    CHECK(c.code == 2);
    CHECK_THAT(c.err.str(), Catch::Contains("unknown command 'verfy' (did "
                                            "you mean 'verify'?)"));
  }
  SECTION("nothing close: named, no guess") {
    Cli c({"deploy"});
    CHECK(c.code == 2);
    CHECK_THAT(c.err.str(), Catch::Contains("unknown command 'deploy'"));
    CHECK(c.err.str().find("did you mean") == std::string::npos);
  }
  SECTION("a flag, after an option's value") {
    Cli c({"install", "--root", "/", "--variantt", "default"});
    CHECK(c.code == 2);
    CHECK_THAT(c.err.str(), Catch::Contains("unknown flag '--variantt' (did "
                                            "you mean '--variant'?)"));
  }
  SECTION("a flag given as --name=value") {
    Cli c({"status", "--kubconfig=/x"});
    CHECK(c.code == 2);
    CHECK_THAT(c.err.str(), Catch::Contains("did you mean '--kubeconfig'?"));
  }
}
