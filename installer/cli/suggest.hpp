// "Did you mean": the closest known word to a mistyped subcommand or flag,
// as git and kubectl suggest (git help.c help_unknown_cmd: Damerau-
// Levenshtein distance; kubectl/cobra: SuggestionsMinimumDistance 2).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace gpunode {

// The candidate closest to `word` by edit distance, or "" when none is
// close enough to be a likely typo.
std::string closest_word(const std::string& word,
                         const std::vector<std::string>& candidates);

// Walks the command line the way `app` would parse it and describes the
// first unknown subcommand or flag with its closest known one, e.g.
// "unknown command 'instal' (did you mean 'install'?)"; "" when every word
// is known (the parse error is about something else).
std::string unknown_word_hint(const CLI::App& app, int argc,
                              const char* const* argv);

}  // namespace gpunode
