#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/site_config.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/pipeline.hpp"
#include "gpunode/progress_display.hpp"
#include "gpunode/runner.hpp"
#include "gpunode/system_host.hpp"

namespace gpunode {

int run_stage_command(RunMode mode, FlagValues flags, const CLI::App& cmd,
                      CommandIo& io) {
  Reporter report(io.out, io.err, flags.json,
                  Reporter::want_color(!flags.no_color, STDERR_FILENO));
  const std::string command = command_name(mode, flags.dry_run);
  auto settings =
      resolve_site_settings(flags, given_setting_flags(cmd), process_env());
  if (!settings) {
    // Usage for a bad setting; cannot-run for a config.toml others can write.
    report.refused(command, settings.error(), settings.error().exit);
    return static_cast<int>(settings.error().exit);
  }
  if (auto exposed = site_config_exposure(flags.root))
    report.warning("config", *exposed);
  auto options = validate_flags(flags);
  if (!options) {
    report.refused(command,
                   with_help_fix(options.error(), command_name(mode, false)),
                   ExitCode::kUsage);
    return static_cast<int>(ExitCode::kUsage);
  }
  options->trust_keys_origin = trust_keys_origin(*settings);
  // Whether the operator chose these, or left them to the host's role and
  // the cluster (a node-scope run takes the cluster's sharing settings).
  bool sharing_flagged = false;
  std::string site_origins;
  for (const Setting& s : *settings) {
    if ((s.key == "variant" || s.key == "replicas") &&
        s.source != SettingSource::kBuiltIn) {
      options->sharing_given = true;
      if (s.source == SettingSource::kFlag)
        sharing_flagged = true;
      else if (site_origins.find(s.origin) == std::string::npos)
        site_origins += (site_origins.empty() ? "" : ", ") + s.origin;
    }
  }
  if (const CLI::Option* o = cmd.get_option_no_throw("--rename-shared")) {
    options->sharing_given |= o->count() > 0;
    sharing_flagged |= o->count() > 0;
  }
  if (!sharing_flagged) options->sharing_site_origin = site_origins;
  options->sharing_from_cluster =
      mode == RunMode::kStatus && !options->sharing_given;
  if (mode == RunMode::kProve) {
    // The proof alone, of what the cluster runs: its settings, not a
    // default's, decide what a slot is.
    options->only = {"smoke"};
    options->smoke = true;
    options->sharing_given = false;
    options->sharing_site_origin.clear();
    options->sharing_from_cluster = true;
  }
  note_given_flags(cmd, *options);
  // Debug logs (-vv) go to stderr, beside the human text.
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(io.err);
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("gpunode", sink));
  spdlog::set_pattern("[debug] %v");
  spdlog::set_level(options->verbosity >= 2 ? spdlog::level::debug
                                            : spdlog::level::warn);

  // Opt-in stages (the smoke Pod) only when asked for; never from status,
  // which changes nothing.
  std::vector<std::string> skip = options->skip;
  for (std::string& name : unasked_opt_in_stages(make_pipeline(), *options,
                                                 mode == RunMode::kStatus))
    skip.push_back(std::move(name));
  auto stages = select_stages(make_pipeline(), options->only, skip);
  if (!stages) {
    report.refused(command, stages.error(), ExitCode::kUsage);
    return static_cast<int>(ExitCode::kUsage);
  }
  report.set_details(!run_mode_changes(mode, options->dry_run) ||
                     options->verbosity > 0);
  if (run_mode_changes(mode, options->dry_run)) install_interrupt_handlers();
  auto host = make_system_host(options->root);
  auto progress = make_cli_progress(flags.json, io.out, io.err);
  return static_cast<int>(
      run_stages(*host, *options, mode, std::move(*stages), report, *progress));
}

}  // namespace gpunode
