// The man page and the completion come from the App that parses the
// command line; these checks walk that App and require every visible
// subcommand and every option in both, so neither can drift.
#include "cli/cli_docs.hpp"

#include <catch2/catch.hpp>
#include <sstream>

#include "cli/commands.hpp"

using namespace gpunode;

namespace {

std::string roff_dashes(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

// The completion's case line for one command path ("" or "/bundle/verify").
std::string completion_case(const std::string& script, const std::string& p) {
  const std::string head = "    \"" + p + "\") subs=";
  const auto at = script.find(head);
  if (at == std::string::npos) return "";
  return script.substr(at, script.find('\n', at) - at);
}

void check_command(const CLI::App& cmd, const std::string& path,
                   const std::string& man, const std::string& completion) {
  std::string slashed = path.empty() ? "" : "/" + path;
  for (auto& c : slashed)
    if (c == ' ') c = '/';
  INFO("command: gpunode " << path);
  if (!path.empty())
    CHECK(man.find(".SS \"gpunode " + roff_dashes(path) + "\"") !=
          std::string::npos);
  const std::string line = completion_case(completion, slashed);
  REQUIRE_FALSE(line.empty());
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->get_positional()) {
      CHECK(man.find("\\fI" + opt->get_name() + "\\fR") != std::string::npos);
      continue;
    }
    for (const auto& l : opt->get_lnames()) {
      INFO("option --" << l);
      CHECK(man.find(roff_dashes("--" + l)) != std::string::npos);
      CHECK(line.find(" --" + l) != std::string::npos);
    }
    for (const auto& s : opt->get_snames()) {
      INFO("option -" << s);
      CHECK(line.find("-" + s) != std::string::npos);
    }
  }
  for (const CLI::App* sub : visible_subcommands(cmd)) {
    CHECK(line.find(sub->get_name()) != std::string::npos);
    check_command(*sub,
                  path.empty() ? sub->get_name() : path + " " + sub->get_name(),
                  man, completion);
  }
}

}  // namespace

TEST_CASE("man page and completion name every command and option",
          "[cli_docs]") {
  std::ostringstream out, err;
  CommandIo io{out, err};
  auto app = make_app(io);
  const std::string man = render_man_page(*app);
  const std::string completion = render_bash_completion(*app);
  CHECK(visible_subcommands(*app).size() >= 7);
  check_command(*app, "", man, completion);
  // The hidden generators document nothing about themselves.
  CHECK(man.find("gpunode man") == std::string::npos);
  CHECK(completion_case(completion, "/completion").empty());
}

TEST_CASE("the docs subcommands print what the renderers make", "[cli_docs]") {
  std::ostringstream out, err;
  CommandIo io{out, err};
  auto app = make_app(io);
  const char* man_argv[] = {"gpunode", "man"};
  app->parse(2, const_cast<char**>(man_argv));
  CHECK(io.exit_code == 0);
  CHECK(out.str() == render_man_page(*app));
  CHECK(out.str().rfind(".TH GPUNODE 1", 0) == 0);
}

TEST_CASE("completion for an unknown shell is a usage error", "[cli_docs]") {
  std::ostringstream out, err;
  CommandIo io{out, err};
  auto app = make_app(io);
  const char* argv[] = {"gpunode", "completion", "zsh"};
  app->parse(3, const_cast<char**>(argv));
  CHECK(io.exit_code == 2);
  CHECK(out.str().empty());
  CHECK(err.str() ==
        "gpunode completion: only 'bash' is supported, got 'zsh'\n");
}
