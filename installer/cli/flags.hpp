// Flags shared by install, plan and status, as typed; validate() turns them
// into Options or a usage error naming the flag.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/options.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

struct FlagValues {
  std::string root = "/";
  std::string state_dir = "/var/lib/gpunode";
  std::string variant = "default";
  // Where the variant came from when not from --variant or the built-in:
  // "GPUNODE_VARIANT" or "<file>:LINE" (resolve_site_settings sets it), so
  // an error about --replicas or --rename-shared can say why the variant is
  // what it is.
  std::string variant_origin;
  std::optional<int> replicas;
  bool rename_shared = false;
  std::optional<std::string> node;  // set but empty is an error
  std::string kubeconfig = "/etc/rancher/k3s/k3s.yaml";
  std::string scope;  // empty: by the host's role
  bool all_nodes = false;
  std::string timeout = "10m";
  std::vector<std::string> only;
  std::vector<std::string> skip;
  bool restart_k3s = false;
  bool upgrade_toolkit = false;
  bool dry_run = false;
  bool json = false;
  bool no_color = false;
  int verbosity = 0;
  std::string min_driver;
  std::string image_archive;
  std::string image_ref;
  std::string bundle;
  std::vector<std::string> trust_keys;
  bool insecure_skip_signature = false;
  bool replace_existing = false;
  bool smoke = false;
  std::string smoke_image;
  std::string proof = "quick";
};

enum class FlagSet { kInstall, kPlan, kStatus, kUninstall, kProve };

void add_flags(CLI::App* cmd, FlagValues& v, FlagSet set);
// `e` with, when it has no fix of its own, one that points at `command`'s
// --help (every command that refuses its flags says the same).
Error with_help_fix(Error e, const std::string& command);
// --replicas' reading: decimal only, as GPUNODE_REPLICAS and config.toml
// read it (CLI11 alone takes 010 as octal, 0x10 as hex).
CLI::Validator decimal_only();
// For a setting flag's help: ". Unset: GPUNODE_X, else config.toml's x"
// and, when given, ", else <builtin>".
std::string site_default_note(const char* flag,
                              const std::string& builtin = "");
Result<Options> validate_flags(const FlagValues& v);
// What only the parsed command knows: which of its flags were given
// (--kubeconfig: a node-part run then uses it, not the kubelet's). Every
// command that builds Options from flags calls it once.
void note_given_flags(const CLI::App& cmd, Options& o);

// A dotted numeric version such as 550.54.15.
bool valid_driver_version(const std::string& v);

// "10m", "90s", "1h30m", "500ms"; a bare number is seconds.
Result<std::chrono::milliseconds> parse_duration(const std::string& text);

}  // namespace gpunode
