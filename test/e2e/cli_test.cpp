// Drives the real gpunode binary: flags, exit codes, output formats.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

using gpunode::test::Run;
using gpunode::test::run_gpunode;
using gpunode::test::TempDir;

TEST_CASE("version prints the version and the stage list", "[cli]") {
  Run r = run_gpunode({"version"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("gpunode "));
  // The human list is --json's `stages` (the pipeline's, held to the
  // README's table by stage_list_test.cpp), each once, bottom-up.
  Run j = run_gpunode({"version", "--json"});
  REQUIRE(j.exit_code == 0);
  const auto version = nlohmann::json::parse(j.out);
  std::string listed = "stages:";
  for (const auto& s : version.at("stages"))
    listed += " " + s.get<std::string>();
  CHECK_THAT(listed, Catch::StartsWith("stages: preflight driver "));
  CHECK_THAT(r.out, Catch::Contains(listed + "\n"));
}

TEST_CASE("help answers with exit 0 and lists the exit codes", "[cli]") {
  Run r = run_gpunode({"--help"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Exit codes"));
  CHECK_THAT(r.out, Catch::Contains("install"));
}

// docs/json-events.md: the last line of every command is the result event.
// A reader (the Ansible module) must learn from it why a command was
// refused before it ran, and that it ran nothing.
TEST_CASE("with --json a refused command still ends with its result event",
          "[cli]") {
  TempDir root;
  struct Refusal {
    std::vector<std::string> args;
    std::string command;
    std::string fragment;
  };
  const std::vector<Refusal> cases = {
      {{"install", "--replicas", "3"}, "install", "--replicas: applies only"},
      {{"install", "--dry-run", "--timeout", "0"},
       "install --dry-run",
       "--timeout"},
      {{"plan", "--scope", "x"}, "plan", "--scope: 'x' is not one of"},
      {{"status", "--only", "gpus"}, "status", "--only: unknown stage 'gpus'"},
      {{"uninstall", "--timeout", "zz"}, "uninstall", "--timeout"},
      {{"install", "--frobnicate"}, "install", "--frobnicate"},
      // A flag the scope never uses; a selection the scope does not run.
      {{"install", "--scope", "node", "--all-nodes"},
       "install",
       "--all-nodes: not used by --scope node"},
      {{"install", "--scope", "node", "--replace-existing"},
       "install",
       "--replace-existing: not used by --scope node"},
      {{"plan", "--scope", "node", "--all-nodes", "--replace-existing"},
       "plan",
       "--all-nodes: not used by --scope node"},
      {{"install", "--scope", "cluster", "--only", "driver"},
       "install",
       "nothing to check: the stages chosen (driver) are not part of --scope "
       "cluster"},
      {{"install", "--scope", "node", "--smoke", "--only", "smoke"},
       "install",
       "nothing to check: the stages chosen (smoke) are not part of --scope "
       "node"},
      {{"prove", "--scope", "node"},
       "prove",
       "nothing to check: the stages chosen (smoke) are not part of --scope "
       "node"},
      {{"status", "--scope", "cluster", "--only", "driver,toolkit"},
       "status",
       "(driver, toolkit) are not part of --scope cluster"},
  };
  for (const Refusal& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.begin() + 1, {"--json", "--root", root.path()});
    INFO(c.command << " " << c.fragment);
    Run r = run_gpunode(args);
    CHECK(r.exit_code == 2);
    const std::string last =
        r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1);
    const auto result = nlohmann::json::parse(last, nullptr, false);
    REQUIRE(result.is_object());
    CHECK(result["event"] == "result");
    CHECK(result["schema"] == 1);
    CHECK(result["command"] == c.command);
    CHECK(result["exit_code"] == 2);
    CHECK(result["status"] == "invalid-input");
    CHECK(result["stages"] == nlohmann::json::array());
    CHECK_THAT(result["summary"].get<std::string>(),
               Catch::Contains(c.fragment));
  }
  // Nothing was written under the root: no journal, no lock.
  CHECK(std::filesystem::is_empty(root.path()));
}

// Regression (independent try of issue 26): a command line CLI11 could not
// parse ended with the result event alone, while every other refusal has
// its error event (layer, message, fix) before it.
TEST_CASE("with --json a command line that does not parse has its error event",
          "[cli]") {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"install", "--json", "--frobnicate"},
           {"status", "--json", "--timeout"},
           {"instal", "--json"}}) {
    INFO(args[0] << " " << args.back());
    Run r = run_gpunode(args);
    CHECK(r.exit_code == 2);
    std::vector<nlohmann::json> events;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      events.push_back(nlohmann::json::parse(line, nullptr, false));
    REQUIRE(events.size() == 2);
    CHECK(events[0]["event"] == "error");
    CHECK(events[0]["layer"] == "usage");
    CHECK(events[0]["exit_code"] == 2);
    CHECK(events[0]["fix"] ==
          (args[0] == "instal"
               ? "gpunode --help lists the commands"
               : "gpunode " + args[0] + " --help gives each flag's values"));
    CHECK(events[1]["event"] == "result");
    CHECK(events[1]["summary"] == events[0]["message"]);
  }
}

// Regression (independent try of issue 26): the archive and bundle conflict
// pointed at --help, not at the flag to drop.
TEST_CASE("an image archive with a bundle is told which to drop", "[cli]") {
  TempDir dir;
  gpunode::test::write_text(dir.path() + "/dp.tar", "x");
  Run r = run_gpunode({"install", "--image-archive", dir.path() + "/dp.tar",
                       "--bundle", dir.path()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("fix: drop --image-archive: the bundle's "
                                    "images/ holds the device plugin's "
                                    "archive"));
}

// Regression (independent try of issue 26): CLI11 answers --help before it
// looks at the other words, so `bundle pull --help` printed bundle's help
// as if pull were one of its commands.
TEST_CASE("a help flag after an unknown command is exit 2 naming the word",
          "[cli]") {
  Run r = run_gpunode({"bundle", "pull", "--help"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown command 'pull'"));
  CHECK(r.out.empty());
  Run known = run_gpunode({"bundle", "verify", "--help"});
  CHECK(known.exit_code == 0);
  CHECK_THAT(known.out, Catch::Contains("Usage: gpunode bundle verify"));
}

// Regression (independent try of issue 26): `--only smoke` outside a run
// that has it was sent to a scope that skips it too. Since issue 27 the
// proof is the cluster part's (cluster or both).
TEST_CASE("stages outside the scope are sent to the scopes that run them",
          "[cli]") {
  TempDir root;
  struct Case {
    std::vector<std::string> args;
    std::string reason, fix;
  };
  const std::vector<Case> cases = {
      {{"--scope", "node", "--only", "smoke"},
       "(the proof Pods are the cluster part's)",
       "fix: run them with --scope cluster or --scope both, or choose"},
      {{"--scope", "cluster", "--only", "driver"},
       "(each GPU node's own run does this host's layers)",
       "fix: run them with --scope node or --scope both, or choose"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"plan", "--root", root.path()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Run r = run_gpunode(args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.reason) && Catch::Contains(c.fix));
  }
  CHECK(std::filesystem::is_empty(root.path()));
}
