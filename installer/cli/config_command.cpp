// `gpunode config show`: every site default's effective value and where it
// came from (flag, env, file with its line, built-in), so an operator can
// see why a node got the variant it got.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/flags.hpp"
#include "cli/site_config.hpp"
#include "exposure/gpu_exposure.hpp"
#include "gpunode/report.hpp"
#include "gpunode/terminal_text.hpp"
#include "gpunode/text.hpp"

namespace gpunode {
namespace {

// A setting as install uses it, in its JSON type (docs/json-events.md,
// `result` of `config show`): "value" is the line people read.
nlohmann::json effective_value(const std::string& key, const Options& o) {
  if (key == "variant") return o.sharing.variant.name;
  if (key == "replicas") return o.sharing.replicas;
  if (key == "timeout") return std::chrono::duration<double>(o.timeout).count();
  if (key == "min-driver")
    return o.min_driver ? nlohmann::json(*o.min_driver) : nlohmann::json();
  if (key == "trust-keys") return o.trust_keys;
  return nullptr;
}

}  // namespace

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
                   "As for install: " + exposure_choices() +
                       site_default_note("--variant", flags->variant));
  show->add_option(
          "--replicas", flags->replicas,
          "As for install: time-slicing slots per GPU (2 to 1024)" +
              site_default_note("--replicas",
                                std::to_string(kDefaultSharedReplicas) +
                                    " with time-slicing"))
      ->transform(decimal_only());
  show->add_option("--timeout", flags->timeout,
                   "As for install: e.g. 10m, 90s, 1h30m" +
                       site_default_note("--timeout", flags->timeout));
  show->add_option("--min-driver", flags->min_driver,
                   "As for install: lowest acceptable driver version" +
                       site_default_note("--min-driver"));
  show->add_option("--trust-key", flags->trust_keys,
                   "As for install: publisher key (Ed25519 .pub)" +
                       site_default_note("--trust-key"));
  show->add_flag("--json", flags->json, "As one JSON object on stdout");
  show->callback([flags, show, &io]() {
    FlagValues v = *flags;
    Reporter report(io.out, io.err, v.json, false);
    auto refuse = [&](const Error& e) {
      report.refused("config show", e, e.exit);
      io.exit_code = static_cast<int>(e.exit);
    };
    if (v.root.empty() || v.root.front() != '/') {
      return refuse(
          usage_error("--root: must be an absolute directory path, got " +
                      quoted_value(v.root)));
    }
    auto settings =
        resolve_site_settings(v, given_setting_flags(*show), process_env());
    if (!settings) return refuse(settings.error());
    // The same checks install makes of these values, flags included: what
    // config show prints is what install would run with, or its error.
    auto options = validate_flags(v);
    if (!options) return refuse(with_help_fix(options.error(), "config show"));
    if (v.json) {
      nlohmann::json list = nlohmann::json::array();
      nlohmann::json effective = nlohmann::json::object();
      for (const Setting& s : *settings) {
        list.push_back({{"key", s.key},
                        {"value", s.value},
                        {"source", source_name(s.source)},
                        {"origin", s.origin}});
        effective[s.key] = effective_value(s.key, *options);
      }
      report.result(
          "config show", ExitCode::kOk, "", {},
          nlohmann::json{{"settings", list}, {"effective", effective}});
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
