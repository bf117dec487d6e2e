// `gpunode config show`: every site default's effective value and where it
// came from (flag, env, file with its line, built-in), so an operator can
// see why a node got the variant it got.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/site_config.hpp"
#include "gpunode/report.hpp"
#include "gpunode/terminal_text.hpp"

namespace gpunode {

void register_config(CLI::App& app, CommandIo& io) {
  CLI::App* config = app.add_subcommand(
      "config", "Site defaults from /etc/gpunode/config.toml and GPUNODE_*");
  config->require_subcommand(1);
  auto flags = std::make_shared<FlagValues>();
  CLI::App* show = config->add_subcommand(
      "show",
      "Print each setting's effective value and its source; precedence: flag "
      "> environment (GPUNODE_*) > <root>/etc/gpunode/config.toml > built-in");
  show->add_option("--root", flags->root,
                   "Directory that stands for the host's / (config.toml is "
                   "read under it)")
      ->capture_default_str();
  show->add_option("--variant", flags->variant,
                   "As for install: 'default' or 'time-slicing'");
  show->add_option("--replicas", flags->replicas,
                   "As for install: time-slicing slots per GPU");
  show->add_option("--timeout", flags->timeout,
                   "As for install: e.g. 10m, 90s, 1h30m");
  show->add_option("--min-driver", flags->min_driver,
                   "As for install: lowest acceptable driver version");
  show->add_option("--trust-key", flags->trust_keys,
                   "As for install: publisher key (Ed25519 .pub)");
  show->add_flag("--json", flags->json, "As one JSON object on stdout");
  show->callback([flags, show, &io]() {
    FlagValues v = *flags;
    Reporter report(io.out, io.err, v.json, false);
    if (v.root.empty() || v.root.front() != '/') {
      report.error(usage_error(
          "--root: must be an absolute directory path, got '" + v.root + "'"));
      io.exit_code = static_cast<int>(ExitCode::kUsage);
      return;
    }
    auto settings =
        resolve_site_settings(v, given_setting_flags(*show), process_env());
    if (!settings) {
      report.error(settings.error());
      io.exit_code = static_cast<int>(settings.error().exit);
      return;
    }
    if (v.json) {
      nlohmann::json list = nlohmann::json::array();
      for (const Setting& s : *settings)
        list.push_back({{"key", s.key},
                        {"value", s.value},
                        {"source", source_name(s.source)},
                        {"origin", s.origin}});
      io.out << nlohmann::json{{"settings", list}}.dump() << '\n';
    } else {
      for (const Setting& s : *settings) {
        std::string key = s.key + ":";
        key.resize(12, ' ');
        io.out << key << terminal_safe(s.value) << "  ("
               << source_name(s.source)
               << (s.origin.empty() ? "" : " " + terminal_safe(s.origin))
               << ")\n";
      }
    }
    io.exit_code = 0;
  });
}

}  // namespace gpunode
