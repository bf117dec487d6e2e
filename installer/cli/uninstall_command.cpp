#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/site_config.hpp"
#include "gpunode/system_host.hpp"
#include "gpunode/uninstall.hpp"

namespace gpunode {

void register_uninstall(CLI::App& app, CommandIo& io) {
  auto flags = std::make_shared<FlagValues>();
  auto keep_image = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("uninstall",
                         "Remove what gpunode installed: the device plugin "
                         "DaemonSet and ConfigMap, the "
                         "RuntimeClass if gpunode created it, and the device "
                         "plugin image and the CUDA sample (unless "
                         "--keep-image), and this node's GPU labels; on an "
                         "agent, or with --scope node, only the labels and "
                         "images; with --scope cluster only the cluster's "
                         "objects. "
                         "Leaves the driver, the toolkit and k3s alone.");
  add_flags(cmd, *flags, FlagSet::kUninstall);
  cmd->add_flag("--keep-image", *keep_image,
                "Keep the device plugin image and the CUDA sample in "
                "containerd");
  cmd->callback([flags, keep_image, cmd, &io]() {
    Reporter report(io.out, io.err, flags->json,
                    Reporter::want_color(!flags->no_color, STDERR_FILENO));
    // Site defaults (the timeout) apply here too; a broken config.toml
    // stops uninstall before it changes anything, like every command.
    auto settings =
        resolve_site_settings(*flags, given_setting_flags(*cmd), process_env());
    if (!settings) {
      report.refused("uninstall", settings.error(), settings.error().exit);
      io.exit_code = static_cast<int>(settings.error().exit);
      return;
    }
    auto options = validate_flags(*flags);
    if (!options) {
      report.refused("uninstall", with_help_fix(options.error(), "uninstall"),
                     ExitCode::kUsage);
      io.exit_code = static_cast<int>(ExitCode::kUsage);
      return;
    }
    // Regression (independent try of issue 26): without this, the node
    // part's uninstall took the kubelet's kubeconfig over --kubeconfig.
    note_given_flags(*cmd, *options);
    auto host = make_system_host(options->root);
    io.exit_code =
        static_cast<int>(run_uninstall(*host, *options, *keep_image, report));
  });
}

}  // namespace gpunode
