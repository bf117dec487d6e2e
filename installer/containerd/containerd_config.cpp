#include "containerd/containerd_config.hpp"

#include <toml++/toml.h>

#include <cstdint>

namespace gpunode {
namespace {

// config.toml is an output of k3s: the lasting fix is always in its input,
// the template, which k3s re-renders from at its next start.
constexpr const char* kGenericFix =
    "config.toml is rewritten by k3s at every start: if config-v3.toml.tmpl "
    "or config.toml.tmpl exists next to it, correct that template, then "
    "restart k3s (sudo systemctl restart k3s, or k3s-agent) to render "
    "config.toml again";

// Dotted TOML path of the runtimes table's parent, by config version.
const char* cri_plugin_for(int version) {
  return version == 3 ? "io.containerd.cri.v1.runtime"
                      : "io.containerd.grpc.v1.cri";
}

Error config_error(const std::string& source, std::uint32_t line,
                   const std::string& what) {
  std::string where = source;
  if (line > 0) where += ":" + std::to_string(line);
  return Error{ExitCode::kUsage, "handler", where + ": " + what, kGenericFix};
}

// A key whose type is wrong makes containerd refuse the runtime, so it is
// reported as malformed input rather than read as "absent".
Result<std::optional<std::string>> string_at(
    const toml::node_view<const toml::node>& v, const std::string& source,
    const std::string& key) {
  if (!v) return std::optional<std::string>();
  if (const auto* s = v.as_string())
    return std::optional<std::string>(s->get());
  return config_error(source, v.node()->source().begin.line,
                      key + " must be a string");
}

Result<std::optional<bool>> bool_at(const toml::node_view<const toml::node>& v,
                                    const std::string& source,
                                    const std::string& key) {
  if (!v) return std::optional<bool>();
  if (const auto* b = v.as_boolean()) return std::optional<bool>(b->get());
  return config_error(source, v.node()->source().begin.line,
                      key + " must be true or false");
}

// Extracts one runtime. `strict` (for the runtimes gpunode relies on) turns a
// wrong-typed value into an error; for the others it is simply not recorded,
// since a broken crun entry is not this installer's business.
Result<ContainerdRuntime> read_runtime(const std::string& name,
                                       const toml::table& table,
                                       const std::string& source, bool strict) {
  ContainerdRuntime rt;
  rt.name = name;
  rt.line = static_cast<int>(table.source().begin.line);
  const toml::node_view<const toml::node> view{table};
  auto type = string_at(view["runtime_type"], source, "runtime_type");
  auto binary =
      string_at(view["options"]["BinaryName"], source, "options.BinaryName");
  auto cgroup = bool_at(view["options"]["SystemdCgroup"], source,
                        "options.SystemdCgroup");
  if (strict) {
    if (!type) return type.error();
    if (!binary) return binary.error();
    if (!cgroup) return cgroup.error();
  }
  if (type) rt.runtime_type = *type;
  if (binary) rt.binary_name = *binary;
  if (cgroup) rt.systemd_cgroup = *cgroup;
  return rt;
}

}  // namespace

const ContainerdRuntime* ContainerdConfig::runtime(
    std::string_view name) const {
  for (const auto& rt : runtimes) {
    if (rt.name == name) return &rt;
  }
  return nullptr;
}

std::string ContainerdConfig::runtime_options_header(
    std::string_view name) const {
  // The quoting k3s's own templates use for each version.
  const char q = version == 3 ? '\'' : '"';
  return std::string("[plugins.") + q + cri_plugin + q +
         ".containerd.runtimes." + q + std::string(name) + q + ".options]";
}

Result<ContainerdConfig> parse_containerd_config(std::string_view text,
                                                 const std::string& source) {
  toml::table doc;
  try {
    // Debian's libtomlplusplus is built with TOML_EXCEPTIONS: parse throws.
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return config_error(source, e.source().begin.line,
                        std::string(e.description()));
  }

  ContainerdConfig config;
  const toml::node* version = doc.get("version");
  if (version == nullptr) {
    // containerd reads a config without `version` as version 1, a layout
    // k3s has never rendered.
    return config_error(source, 0,
                        "no `version` key (containerd would read it as "
                        "version 1); gpunode reads the version 2 and 3 "
                        "configs that k3s renders");
  }
  const auto* version_int = version->as_integer();
  if (version_int == nullptr ||
      (version_int->get() != 2 && version_int->get() != 3)) {
    return config_error(source, version->source().begin.line,
                        "unsupported containerd config version " +
                            (version_int ? std::to_string(version_int->get())
                                         : std::string("(not an integer)")) +
                            "; gpunode reads the version 2 and 3 configs "
                            "that k3s renders");
  }
  config.version = static_cast<int>(version_int->get());
  config.cri_plugin = cri_plugin_for(config.version);

  const toml::node_view<const toml::node> containerd =
      toml::node_view<const toml::node>{
          doc}["plugins"][config.cri_plugin]["containerd"];
  auto default_runtime = string_at(containerd["default_runtime_name"], source,
                                   "default_runtime_name");
  if (!default_runtime) return default_runtime.error();
  config.default_runtime_name = *default_runtime;

  if (const toml::table* runtimes = containerd["runtimes"].as_table()) {
    for (const auto& [key, node] : *runtimes) {
      const std::string name(key.str());
      // The handlers gpunode judges must be read exactly; see read_runtime.
      const bool strict = name == "nvidia" || name == "runc";
      const toml::table* table = node.as_table();
      if (table == nullptr) {
        if (strict) {
          return config_error(source, node.source().begin.line,
                              "runtimes." + name + " must be a table");
        }
        continue;
      }
      auto rt = read_runtime(name, *table, source, strict);
      if (!rt) return rt.error();
      config.runtimes.push_back(std::move(*rt));
    }
  }
  return config;
}

Result<ContainerdConfig> load_containerd_config(const FileSystem& fs,
                                                const std::string& path) {
  auto text = fs.read_file(path, kMaxContainerdConfigBytes);
  if (!text) return text.error();
  return parse_containerd_config(*text, path);
}

}  // namespace gpunode
