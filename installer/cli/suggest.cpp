#include "cli/suggest.hpp"

#include <algorithm>

namespace gpunode {
namespace {

// Optimal string alignment distance (Damerau-Levenshtein without repeated
// edits of one substring): a swapped pair of letters counts as one typo.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(
      a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string did_you_mean(const std::string& what, const std::string& word,
                         const std::vector<std::string>& known) {
  const std::string best = closest_word(word, known);
  return "unknown " + what + " '" + word + "'" +
         (best.empty() ? "" : " (did you mean '" + best + "'?)");
}

}  // namespace

std::string closest_word(const std::string& word,
                         const std::vector<std::string>& candidates) {
  // Typed words are at most a few hundred bytes; a huge argument is not a
  // typo and would cost quadratic time.
  if (word.size() > 256) return "";
  std::string best;
  std::size_t best_distance = 0;
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (best.empty() || d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  // Close enough to be a typo: at most 2 edits (cobra's default), and fewer
  // than half the word's letters, so that "x" does not suggest "bundle".
  const std::size_t limit = std::min<std::size_t>(2, (word.size() + 1) / 2);
  return !best.empty() && best_distance <= limit ? best : "";
}

std::string unknown_word_hint(const CLI::App& app, int argc,
                              const char* const* argv) {
  const CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) == 0) {
      const std::string name = arg.substr(2, arg.find('=') - 2);
      const CLI::Option* opt = at->get_option_no_throw("--" + name);
      if (opt == nullptr) {
        std::vector<std::string> known;
        for (const CLI::Option* o : at->get_options())
          for (const std::string& l : o->get_lnames())
            known.push_back("--" + l);
        return did_you_mean("flag", "--" + name, known);
      }
      // The value of an option given as "--flag VALUE".
      if (arg.find('=') == std::string::npos && opt->get_type_size_max() > 0)
        ++i;
      continue;
    }
    if (arg.rfind("-", 0) == 0) continue;  // short flags: CLI11's message
    std::vector<std::string> shown;        // hidden ones are not suggested
    const CLI::App* next = nullptr;
    for (const CLI::App* sub :
         at->get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == arg) next = sub;
      if (!sub->get_group().empty()) shown.push_back(sub->get_name());
    }
    if (next != nullptr) {
      at = next;
      continue;
    }
    // A word where a subcommand must come (gpunode's commands with
    // subcommands take no positional arguments): a mistyped one.
    if (!at->get_subcommands([](const CLI::App*) { return true; }).empty())
      return did_you_mean("command", arg, shown);
  }
  return "";
}

}  // namespace gpunode
