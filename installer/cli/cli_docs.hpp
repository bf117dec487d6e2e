// The man page and the bash completion, rendered from the CLI11 App that
// parses the command line, so neither can name a flag the parser lacks or
// miss one it has (test/unit/cli_docs_test.cpp checks every one).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace gpunode {

// gpunode.1 in roff (man(7) macros).
std::string render_man_page(const CLI::App& app);

// A bash completion script defining _gpunode for `complete -F`.
std::string render_bash_completion(const CLI::App& app);

// Subcommands a user sees (hidden ones, in the empty group, are left out).
std::vector<const CLI::App*> visible_subcommands(const CLI::App& app);

}  // namespace gpunode
