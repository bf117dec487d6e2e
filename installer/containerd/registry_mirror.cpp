#include "containerd/registry_mirror.hpp"

#include <algorithm>
#include <vector>

#include "kube/manifests.hpp"

namespace gpunode {
namespace {

// registries.yaml and config.yaml are a few KiB.
constexpr std::size_t kMaxYamlBytes = 1 << 20;

// The file's one YAML document as JSON; nullopt when it does not exist.
std::optional<nlohmann::json> read_yaml(const FileSystem& fs,
                                        const std::string& path,
                                        std::string& problem) {
  if (!fs.stat(path)) return std::nullopt;
  auto text = fs.read_file(path, kMaxYamlBytes);
  if (!text) {
    problem = text.error().message;
    return std::nullopt;
  }
  auto docs = yaml_documents(*text, path);
  if (!docs) {
    problem = docs.error().message;
    return std::nullopt;
  }
  if (docs->empty() || !docs->front().is_object())
    return nlohmann::json::object();
  return docs->front();
}

// k3s reads config.yaml, then config.yaml.d/*.yaml in name order, a later
// file's key replacing an earlier one's (pkg/configfilearg).
void read_embedded_flag(const FileSystem& fs, RegistryMirror& m) {
  std::vector<std::string> files{kK3sConfigYaml};
  const std::string dropins = std::string(kK3sConfigYaml) + ".d";
  auto names = fs.list_dir(dropins);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".yaml") == 0)
      files.push_back(dropins + "/" + n);
  }
  for (const auto& f : files) {
    auto doc = read_yaml(fs, f, m.problem);
    if (!doc || !doc->contains("embedded-registry")) continue;
    const auto& v = (*doc)["embedded-registry"];
    m.embedded_registry = v.is_boolean() ? v.get<bool>() : v == "true";
    m.source = *m.embedded_registry ? f : "";
  }
}

// [host."https://127.0.0.1:PORT/v2"] (or [::1]): k3s's local endpoint.
bool names_local_endpoint(const std::string& hosts_toml) {
  for (const char* loopback :
       {"[host.\"https://127.0.0.1:", "[host.\"https://[::1]:"}) {
    for (std::size_t at = hosts_toml.find(loopback); at != std::string::npos;
         at = hosts_toml.find(loopback, at + 1)) {
      const std::size_t end = hosts_toml.find("\"]", at);
      if (end != std::string::npos &&
          hosts_toml.compare(end - 3, 3, "/v2") == 0)
        return true;
    }
  }
  return false;
}

}  // namespace

ImageName split_image_name(const std::string& ref) {
  std::string name = ref.substr(0, ref.find('@'));
  const std::size_t slash = name.find('/');
  const std::size_t colon = name.rfind(':');
  if (colon != std::string::npos &&
      (slash == std::string::npos || colon > name.rfind('/')))
    name.resize(colon);
  // A first part with a dot or a port, or localhost, is a registry
  // (distribution/reference's splitDockerDomain).
  if (slash != std::string::npos) {
    const std::string first = name.substr(0, slash);
    if (first.find_first_of(".:") != std::string::npos || first == "localhost")
      return {first, name.substr(slash + 1)};
    return {"docker.io", name};
  }
  return {"docker.io", "library/" + name};
}

nlohmann::json RegistryMirror::facts() const {
  using nlohmann::json;
  return {{"enabled", enabled()},
          {"registry", registry},
          {"registry_mirrored", registry_mirrored},
          {"embedded_registry",
           embedded_registry ? json(*embedded_registry) : json(nullptr)},
          {"local_endpoint", local_endpoint},
          {"source", source.empty() ? json(nullptr) : json(source)}};
}

RegistryMirror read_registry_mirror(const FileSystem& fs,
                                    const std::string& image_ref) {
  RegistryMirror m;
  m.registry = split_image_name(image_ref).registry;
  if (auto doc = read_yaml(fs, kRegistriesYaml, m.problem)) {
    const auto mirrors = doc->value("mirrors", nlohmann::json::object());
    m.registry_mirrored = mirrors.is_object() && mirrors.contains(m.registry);
  }
  read_embedded_flag(fs, m);
  const std::string hosts =
      std::string(kCertsDir) + "/" + m.registry + "/hosts.toml";
  if (fs.stat(hosts)) {
    auto text = fs.read_file(hosts, kMaxYamlBytes);
    m.local_endpoint = text && names_local_endpoint(*text);
    if (m.local_endpoint && m.source.empty()) m.source = hosts;
  }
  return m;
}

}  // namespace gpunode
