#include "cli/site_config.hpp"

#include <toml++/toml.h>

#include <cstdlib>

#include "exposure/gpu_exposure.hpp"
#include "gpunode/path_safety.hpp"
#include "gpunode/system_host.hpp"
#include "gpunode/text.hpp"
#include "gpunode/trust_anchor.hpp"

namespace gpunode {
namespace {

constexpr std::size_t kMaxConfigBytes = 256 * 1024;

// Each check returns what is wrong with a value, or "" when it is fine.
// (The variant's and replicas' checks are gpunode/sharing.hpp's.)
std::string check_timeout(const std::string& v) {
  return parse_duration(v) ? ""
                           : "expected a positive duration of at most 168h "
                             "such as 10m, 90s or 1h30m, got " +
                                 quoted_value(v);
}
std::string check_min_driver(const std::string& v) {
  return valid_driver_version(v)
             ? ""
             : "expected a dotted version such as 550.54.15, got " +
                   quoted_value(v);
}
std::string check_key_path(const std::string& v) {
  return !v.empty() && v.front() == '/'
             ? ""
             : "expected an absolute path, got " + quoted_value(v);
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) out.push_back(text.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One setting's value as read from the environment or the file.
struct Found {
  std::string text;                // variant, timeout, min-driver
  long long number = 0;            // replicas
  std::vector<std::string> paths;  // trust-keys
  std::string origin;
};

using Values = std::map<std::string, Found>;

// A variable whose flag was given is not read at all: the flag overrides
// it, as the fix line of a bad one says.
Result<Values> read_env(const EnvLookup& env,
                        const std::set<std::string>& given_flags) {
  Values out;
  for (const SettingSpec& spec : setting_specs()) {
    if (given_flags.count(spec.flag)) continue;
    auto raw = env(spec.env);
    if (!raw || raw->empty()) continue;
    Found f;
    f.origin = spec.env;
    std::string problem;
    const std::string key = spec.key;
    if (key == "replicas") {
      const bool digits =
          raw->size() <= 9 &&
          raw->find_first_not_of("0123456789") == std::string::npos;
      problem = digits ? replicas_problem(std::stoll(*raw))
                       : "expected a whole number, got " + quoted_value(*raw);
      if (digits) f.number = std::stoll(*raw);
    } else if (key == "trust-keys") {
      f.paths = split_commas(*raw);
      for (const auto& p : f.paths)
        if (problem.empty()) problem = check_key_path(p);
    } else {
      f.text = *raw;
      problem = key == "variant"   ? variant_problem(f.text)
                : key == "timeout" ? check_timeout(f.text)
                                   : check_min_driver(f.text);
    }
    if (!problem.empty()) {
      Error e = usage_error(std::string(spec.env) + ": " + problem);
      e.fix = "set " + std::string(spec.env) +
              " in gpunode's environment to a valid value, or unset it (" +
              spec.flag + ", when given, overrides it)";
      return e;
    }
    out[key] = std::move(f);
  }
  return out;
}

Result<Values> read_file(const FileSystem& fs, const std::string& shown) {
  Values out;
  if (!fs.stat(kSiteConfigPath)) {
    // A link that leads nowhere inside the root (dangling, a loop, or out
    // of the root) is a file the operator made, not an absent one: refused,
    // rather than the built-in defaults taken without a word.
    if (fs.is_symlink(kSiteConfigPath)) {
      // The link itself, not where it points.
      const std::string link = fs.resolve_entry(kSiteConfigPath);
      Error e = usage_error(link +
                            ": a symbolic link that leads to no file inside "
                            "the root (dangling, a loop, or out of it)");
      e.fix = "point it at a file under the root, or remove it (sudo rm " +
              link + ")";
      return e;
    }
    return out;
  }
  auto text = fs.read_file(kSiteConfigPath, kMaxConfigBytes);
  if (!text)
    return usage_error(shown + ": cannot read: " + text.error().message);
  toml::table doc;
  try {
    doc = toml::parse(*text, shown);
  } catch (const toml::parse_error& e) {
    Error bad =
        usage_error(shown + ":" + std::to_string(e.source().begin.line) + ": " +
                    std::string(e.description()));
    // Nothing of the file is taken until it parses (the independent try of
    // issue 26 found no fix line here).
    bad.fix = "correct line " + std::to_string(e.source().begin.line) + " of " +
              shown + " (TOML: key = \"text\" or key = number, one a line)";
    return bad;
  }
  for (const auto& [k, node] : doc) {
    const std::string key(k.str());
    const std::string at =
        shown + ":" + std::to_string(node.source().begin.line);
    auto bad = [&](const std::string& what) {
      Error e = usage_error(at + ": key '" + key + "': " + what);
      e.fix = "correct or remove key '" + key + "' in " + shown;
      return e;
    };
    bool known = false;
    for (const SettingSpec& spec : setting_specs()) known |= key == spec.key;
    if (!known) {
      std::string keys;
      for (const SettingSpec& spec : setting_specs())
        keys += (keys.empty() ? "" : ", ") + std::string(spec.key);
      return bad("unknown key (known: " + keys + ")");
    }
    Found f;
    f.origin = at;
    std::string problem;
    if (key == "replicas") {
      if (!node.is_integer()) return bad("expected an integer");
      f.number = node.value<long long>().value_or(0);
      problem = replicas_problem(f.number);
    } else if (key == "trust-keys") {
      const toml::array* list = node.as_array();
      if (list == nullptr) return bad("expected an array of paths");
      for (const auto& item : *list) {
        if (!item.is_string()) return bad("expected an array of paths");
        f.paths.push_back(*item.value<std::string>());
        if (problem.empty()) problem = check_key_path(f.paths.back());
      }
    } else {
      if (!node.is_string()) return bad("expected a string");
      f.text = *node.value<std::string>();
      problem = key == "variant"   ? variant_problem(f.text)
                : key == "timeout" ? check_timeout(f.text)
                                   : check_min_driver(f.text);
    }
    if (!problem.empty()) return bad(problem);
    out[key] = std::move(f);
  }
  return out;
}

}  // namespace

const char* source_name(SettingSource s) {
  switch (s) {
    case SettingSource::kFlag:
      return "flag";
    case SettingSource::kEnv:
      return "env";
    case SettingSource::kFile:
      return "file";
    case SettingSource::kBuiltIn:
      return "built-in";
  }
  return "built-in";
}

const std::vector<SettingSpec>& setting_specs() {
  static const std::vector<SettingSpec> specs = {
      {"variant", "--variant", "GPUNODE_VARIANT"},
      {"replicas", "--replicas", "GPUNODE_REPLICAS"},
      {"timeout", "--timeout", "GPUNODE_TIMEOUT"},
      {"min-driver", "--min-driver", "GPUNODE_MIN_DRIVER"},
      {"trust-keys", "--trust-key", "GPUNODE_TRUST_KEYS"},
  };
  return specs;
}

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::string trust_keys_origin(const std::vector<Setting>& settings) {
  for (const Setting& s : settings)
    if (s.key == "trust-keys" && !s.origin.empty()) return s.origin;
  return "--trust-key";
}

std::set<std::string> given_setting_flags(const CLI::App& cmd) {
  std::set<std::string> given;
  for (const SettingSpec& spec : setting_specs()) {
    const CLI::Option* opt = cmd.get_option_no_throw(spec.flag);
    if (opt != nullptr && opt->count() > 0) given.insert(spec.flag);
  }
  return given;
}

namespace {

// Why a config.toml someone other than root could rewrite is a risk: the
// one wording of the refusal (resolve_site_settings) and the warning.
std::string exposure_text(const std::string& shown, const std::string& what,
                          const UnsafeComponent& unsafe) {
  return shown + " " + what + ", and " + unsafe.path + " " + unsafe.why +
         ": someone other than root could choose what gpunode does here";
}

}  // namespace

std::optional<std::string> site_config_exposure(const std::string& root) {
  if (root.empty() || root.front() != '/') return std::nullopt;
  auto fs = make_rooted_file_system(root);
  if (!fs->stat(kSiteConfigPath)) return std::nullopt;
  auto unsafe = find_unsafe_component(*fs, kSiteConfigPath);
  if (!unsafe) return std::nullopt;
  const std::string shown =
      root == "/" ? kSiteConfigPath : fs->resolve(kSiteConfigPath);
  return exposure_text(shown, "sets this node's defaults", *unsafe) +
         " (a run that takes a setting from it is refused); fix: " +
         unsafe->fix;
}

Result<std::vector<Setting>> resolve_site_settings(
    FlagValues& v, const std::set<std::string>& given_flags,
    const EnvLookup& env) {
  // A bad --root is validate_flags' to report, with its own message.
  if (v.root.empty() || v.root.front() != '/') return std::vector<Setting>{};
  auto fs = make_rooted_file_system(v.root);
  const std::string shown =
      v.root == "/" ? kSiteConfigPath : fs->resolve(kSiteConfigPath);
  auto from_env = read_env(env, given_flags);
  if (!from_env) return from_env.error();
  auto from_file = read_file(*fs, shown);
  if (!from_file) return from_file.error();

  std::vector<Setting> out;
  for (const SettingSpec& spec : setting_specs()) {
    const std::string key = spec.key;
    Setting s{key, "", SettingSource::kBuiltIn, ""};
    const Found* found = nullptr;
    if (given_flags.count(spec.flag)) {
      s.source = SettingSource::kFlag;
      s.origin = spec.flag;
    } else if (from_env->count(key)) {
      found = &from_env->at(key);
      s.source = SettingSource::kEnv;
    } else if (from_file->count(key)) {
      found = &from_file->at(key);
      s.source = SettingSource::kFile;
    }
    if (found != nullptr) {
      s.origin = found->origin;
      if (key == "variant") {
        v.variant = found->text;
        v.variant_origin = found->origin;
      }
      if (key == "timeout") v.timeout = found->text;
      if (key == "min-driver") v.min_driver = found->text;
      if (key == "replicas") v.replicas = static_cast<int>(found->number);
      if (key == "trust-keys") {
        // The file then decides whose bundles this node runs: an anchor,
        // held to the rule for the key files it names (exit 5 when someone
        // other than root could rewrite it), in every command that reads
        // it. The fix is the chmod alone: config.toml has its fixed place.
        if (s.source == SettingSource::kFile) {
          if (auto safe = check_trust_anchor(fs->resolve(kSiteConfigPath),
                                             "site config (it sets "
                                             "trust-keys)",
                                             "");
              !safe)
            return safe.error();
        }
        v.trust_keys.clear();
        for (const auto& p : found->paths)
          v.trust_keys.push_back(
              s.source == SettingSource::kFile ? fs->resolve(p) : p);
      }
    }
    out.push_back(std::move(s));
  }
  // A setting taken from a config.toml that someone other than root could
  // rewrite would let them choose what root does here (the variant of the
  // whole cluster's device plugin, the driver floor): refused as a loose
  // state dir or key is (the independent try of issue 26). A loose file
  // whose every setting a flag or variable overrides is only warned of
  // (site_config_exposure).
  std::string taken;
  for (const Setting& s : out)
    if (s.source == SettingSource::kFile)
      taken += (taken.empty() ? "" : ", ") + s.key;
  if (!taken.empty()) {
    if (auto unsafe = find_unsafe_component(*fs, kSiteConfigPath)) {
      return Error{
          ExitCode::kCannotRun, "config",
          exposure_text(shown, "sets " + taken + " for this run", *unsafe),
          unsafe->fix};
    }
  }
  // A site default for replicas applies to a variant that takes them
  // (time-slicing) only; with another it is ignored rather than refused
  // (only an explicit --replicas there is a mistake).
  const bool takes_replicas = variant_takes_replicas(v.variant);
  for (Setting& s : out) {
    if (s.key == "replicas" && s.source != SettingSource::kFlag &&
        !takes_replicas && v.replicas) {
      v.replicas.reset();
      s.value = "(unused: variant " + v.variant + ")";
    }
  }
  for (Setting& s : out) {
    if (!s.value.empty()) continue;
    if (s.key == "variant") s.value = v.variant;
    if (s.key == "timeout") s.value = v.timeout;
    if (s.key == "min-driver")
      s.value = v.min_driver.empty() ? "(none)" : v.min_driver;
    if (s.key == "replicas")
      s.value = v.replicas
                    ? std::to_string(*v.replicas)
                    : (takes_replicas ? std::to_string(kDefaultSharedReplicas)
                                      : "1 (variant " + v.variant + ")");
    if (s.key == "trust-keys")
      s.value =
          v.trust_keys.empty()
              ? "(none; also " + std::string("/etc/gpunode/trusted-keys/*.pub)")
              : join(v.trust_keys);
  }
  return out;
}

}  // namespace gpunode
