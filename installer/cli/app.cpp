#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/suggest.hpp"
#include "gpunode/report.hpp"
#include "gpunode/terminal_text.hpp"

namespace gpunode {

namespace {

constexpr const char* kFooter = R"(Exit codes:
  0  done (every layer in place)
  1  a stage is blocked: the message names the layer and the fix
  2  usage or invalid input (bad flag, malformed file)
  3  timed out waiting
  4  bundle integrity or signature failure
  5  cannot run (not root, or another run holds the lock)
  130  stopped by Ctrl-C (SIGINT, SIGTERM or SIGHUP): rerun it to converge

Run 'gpunode COMMAND --help' for a command's flags.)";

}  // namespace

std::unique_ptr<CLI::App> make_app(CommandIo& io) {
  auto app = std::make_unique<CLI::App>(
      "gpunode: bring an NVIDIA GPU node running k3s to the point where Pods "
      "can use its "
      "GPUs, offline, layer by layer (driver, container toolkit, containerd "
      "runtime handler, "
      "...). Safe to rerun after any failure.",
      "gpunode");
  app->footer(kFooter);
  app->require_subcommand(1);
  register_install(*app, io);
  register_plan(*app, io);
  register_status(*app, io);
  register_prove(*app, io);
  register_evidence(*app, io);
  register_uninstall(*app, io);
  register_version(*app, io);
  register_bundle(*app, io);
  register_config(*app, io);
  register_docs(*app, io);
  return app;
}

namespace {

// A command line that did not parse: exit 2, said the same way for people
// and, with --json, as the error and result events every refusal emits (a
// reader such as the Ansible module learns why from them).
int refuse_usage(const CLI::App& app, const std::string& message, int argc,
                 char** argv, std::ostream& out, std::ostream& err) {
  err << "gpunode: " << terminal_safe(message)
      << "\nRun 'gpunode --help' for usage.\n";
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (std::find(args.begin(), args.end(), "--json") != args.end()) {
    const auto command = std::find_if(
        args.begin(), args.end(),
        [](const std::string& a) { return !a.empty() && a[0] != '-'; });
    const std::string name = command == args.end() ? std::string() : *command;
    const bool known =
        !name.empty() && !app.get_subcommands([&](const CLI::App* sub) {
                               return sub->get_name() == name;
                             })
                              .empty();
    const Error e{ExitCode::kUsage, "usage", message,
                  !known
                      ? "gpunode --help lists the commands"
                      : "gpunode " + name + " --help gives each flag's values"};
    for (const auto& event :
         {Reporter::error_event(e),
          Reporter::result_event(name, ExitCode::kUsage, message, {})})
      out << event.dump(-1, ' ', false,
                        nlohmann::json::error_handler_t::replace)
          << '\n';
  }
  return static_cast<int>(ExitCode::kUsage);
}

}  // namespace

int run_cli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CommandIo io{out, err};
  auto app_ptr = make_app(io);
  CLI::App& app = *app_ptr;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    // CLI11 answers --help before it looks at the other words: `gpunode
    // bundle pull --help` printed bundle's help as if pull were one of its
    // commands (the independent try of issue 26).
    const std::string hint = unknown_word_hint(app, argc, argv);
    if (!hint.empty()) return refuse_usage(app, hint, argc, argv, out, err);
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    // CLI11 has its own exit codes; ours are the contract: usage is 2.
    // CLI11 says a mistyped command is "not expected"; name it and the
    // closest known word instead.
    const std::string hint = unknown_word_hint(app, argc, argv);
    return refuse_usage(app, hint.empty() ? std::string(e.what()) : hint, argc,
                        argv, out, err);
  }
  return io.exit_code;
}

}  // namespace gpunode
