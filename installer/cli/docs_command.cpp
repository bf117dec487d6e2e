// Hidden subcommands that print the man page and the bash completion from
// the App they are part of; the build runs them to make the packaged files.
#include "cli/cli_docs.hpp"
#include "cli/commands.hpp"
#include "gpunode/terminal_text.hpp"

namespace gpunode {

void register_docs(CLI::App& app, CommandIo& io) {
  // The empty group hides them from --help and from the docs themselves.
  CLI::App* man = app.add_subcommand("man", "Print the man page (roff)");
  man->group("");
  man->callback([&app, &io]() {
    io.out << render_man_page(app);
    io.exit_code = 0;
  });
  CLI::App* completion =
      app.add_subcommand("completion", "Print a shell completion script");
  completion->group("");
  auto shell = std::make_shared<std::string>();
  completion->add_option("SHELL", *shell, "Only 'bash'")->required();
  completion->callback([&app, &io, shell]() {
    if (*shell != "bash") {
      io.err << "gpunode completion: only 'bash' is supported, got '"
             << terminal_safe(*shell) << "'\n";
      io.exit_code = 2;
      return;
    }
    io.out << render_bash_completion(app);
    io.exit_code = 0;
  });
}

}  // namespace gpunode
