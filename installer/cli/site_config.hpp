// Site defaults: /etc/gpunode/config.toml (read under --root) and
// GPUNODE_* environment variables. For each setting the first source that
// has it wins: flag > environment > file > built-in. A bad file or variable
// is a usage error (exit 2) naming the file, line and key (or the variable),
// found before anything runs.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/flags.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

inline constexpr const char* kSiteConfigPath = "/etc/gpunode/config.toml";

enum class SettingSource { kFlag, kEnv, kFile, kBuiltIn };
const char* source_name(SettingSource s);

struct Setting {
  std::string key;    // as in config.toml: variant, replicas, ...
  std::string value;  // as shown; lists joined with ", "
  SettingSource source = SettingSource::kBuiltIn;
  std::string origin;  // "--variant", "GPUNODE_VARIANT", "<file>:3", ""
};

// The flags that set each key (--trust-key sets trust-keys).
struct SettingSpec {
  const char* key;
  const char* flag;
  const char* env;
};
const std::vector<SettingSpec>& setting_specs();

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// Fills the settings in `v` that no flag in `given_flags` set, from the
// environment, then <v.root>/etc/gpunode/config.toml (a missing file is
// fine). Returns every setting with its source. Trust keys named in the
// file are host paths, so they are taken under v.root.
Result<std::vector<Setting>> resolve_site_settings(
    FlagValues& v, const std::set<std::string>& given_flags,
    const EnvLookup& env);

// A warning when <root>/etc/gpunode/config.toml exists and someone other
// than root could rewrite it (it or a directory above it). A run that
// takes any setting from such a file is refused (exit 5) in
// resolve_site_settings; this warns of one whose settings all gave way to
// flags and variables.
std::optional<std::string> site_config_exposure(const std::string& root);

// Where the trust-keys setting came from: "--trust-key",
// "GPUNODE_TRUST_KEYS" or "<file>:LINE" (for messages about those keys).
std::string trust_keys_origin(const std::vector<Setting>& settings);

// The setting flags the user typed on `cmd`'s command line.
std::set<std::string> given_setting_flags(const CLI::App& cmd);

}  // namespace gpunode
