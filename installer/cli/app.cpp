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
  register_uninstall(*app, io);
  register_version(*app, io);
  register_bundle(*app, io);
  register_config(*app, io);
  register_docs(*app, io);
  return app;
}

int run_cli(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CommandIo io{out, err};
  auto app_ptr = make_app(io);
  CLI::App& app = *app_ptr;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError& e) {
    // CLI11 has its own exit codes; ours are the contract: usage is 2.
    // CLI11 says a mistyped command is "not expected"; name it and the
    // closest known word instead.
    const std::string hint = unknown_word_hint(app, argc, argv);
    const std::string message = hint.empty() ? std::string(e.what()) : hint;
    err << "gpunode: " << terminal_safe(message)
        << "\nRun 'gpunode --help' for usage.\n";
    // With --json the last line is the result event even when the flags
    // did not parse: a reader (the Ansible module) learns why from it.
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (std::find(args.begin(), args.end(), "--json") != args.end()) {
      const auto command = std::find_if(
          args.begin(), args.end(),
          [](const std::string& a) { return !a.empty() && a[0] != '-'; });
      out << Reporter::result_event(
                 command == args.end() ? std::string() : *command,
                 ExitCode::kUsage, message, {})
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
          << '\n';
    }
    return static_cast<int>(ExitCode::kUsage);
  }
  return io.exit_code;
}

}  // namespace gpunode
