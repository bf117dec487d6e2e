#include "stages/toolkit_set.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

#include "gpunode/text.hpp"
#include "gpunode/toolkit_packages.hpp"

namespace gpunode {
namespace {

constexpr std::chrono::milliseconds kQueryTimeout = std::chrono::seconds(30);

std::vector<std::string> toolkit_names() {
  return {kToolkitPackageNames.begin(), kToolkitPackageNames.end()};
}

// "rpm x86_64 1.17.8-1, deb amd64 1.17.8-1": each family and architecture
// the bundle has packages for, with nvidia-container-toolkit's version
// (else the first package's).
std::string carried_text(const std::vector<bundle::PackageEntry>& all) {
  std::map<std::string, std::string> sets;  // "family arch" -> version
  for (const auto& p : all) {
    const std::string key = p.family + " " + p.arch;
    if (p.name == kToolkitPackageNames[0] || !sets.count(key))
      sets[key] = p.version;
  }
  if (sets.empty()) return "no toolkit packages";
  std::vector<std::string> words;
  for (const auto& [key, version] : sets) words.push_back(key + " " + version);
  return join(words);
}

// Fills the set's installed, unfinished or query_error from one query of
// the four names.
void read_installed(Context& ctx, ToolkitSet& set) {
  auto installed = installed_versions(ctx.host.proc(), set.pm, ctx.opts.root,
                                      toolkit_names(),
                                      std::min(kQueryTimeout, ctx.time_left()));
  if (installed) {
    set.installed = std::move(installed->versions);
    set.unfinished = std::move(installed->unfinished);
  } else
    set.query_error = installed.error();
}

}  // namespace

bool ToolkitSet::current() const {
  if (!complete()) return false;
  for (const auto& e : entries) {
    auto it = installed.find(e.name);
    if (it == installed.end() || !it->second || *it->second != e.version)
      return false;
  }
  return true;
}

bool ToolkitSet::other_version() const {
  for (const auto& e : entries) {
    auto it = installed.find(e.name);
    if (it != installed.end() && it->second && *it->second != e.version)
      return true;
  }
  return false;
}

std::string ToolkitSet::installed_text() const {
  std::vector<std::string> versions;
  for (const auto& [name, version] : installed) {
    if (version &&
        std::find(versions.begin(), versions.end(), *version) == versions.end())
      versions.push_back(*version);
  }
  std::sort(versions.begin(), versions.end());
  return versions.empty() ? "none" : join(versions);
}

std::string ToolkitSet::unfinished_text() const {
  std::vector<std::string> items;
  for (const auto& [name, u] : unfinished)
    items.push_back(name + " " + u.version + " (" + u.state + ": " +
                    unfinished_state_text(u.state) + ")");
  return join(items);
}

bool ToolkitSet::unfinished_at_set_version() const {
  for (const auto& [name, u] : unfinished)
    if (u.version != version) return false;
  return true;
}

std::vector<std::size_t> ToolkitSet::to_install() const {
  std::vector<std::size_t> wanted;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    auto it = installed.find(entries[i].name);
    if (it == installed.end() || it->second != entries[i].version)
      wanted.push_back(i);
  }
  return wanted;
}

std::vector<std::string> ToolkitSet::files_to_install() const {
  std::vector<std::string> files;
  for (const std::size_t i : to_install()) files.push_back(paths[i]);
  return files;
}

std::uint64_t ToolkitSet::bytes_to_install() const {
  std::uint64_t bytes = 0;
  for (const std::size_t i : to_install()) bytes += sizes[i];
  return bytes;
}

nlohmann::json ToolkitSet::facts() const {
  nlohmann::json installed_json = nlohmann::json::object();
  nlohmann::json unfinished_json = nlohmann::json::object();
  for (const auto& [name, u] : unfinished)
    unfinished_json[name] = {{"state", u.state}, {"version", u.version}};
  for (const auto& [name, version] : installed)
    installed_json[name] = version ? nlohmann::json(*version) : nullptr;
  return {
      {"family",
       pm.family.empty() ? nlohmann::json(nullptr) : nlohmann::json(pm.family)},
      {"arch", arch.empty() ? nlohmann::json(nullptr) : nlohmann::json(arch)},
      {"bundle_version",
       complete() ? nlohmann::json(version) : nlohmann::json(nullptr)},
      {"carried", carried},
      {"installed", installed_json},
      {"unfinished", unfinished_json},
      {"files", files_to_install()},
      {"bytes", bytes_to_install()},
      {"machine", machine},
      {"os_id", pm.os_id},
      {"os_like", pm.os_like},
      {"query_error",
       query_error ? nlohmann::json(query_error->message) : nullptr}};
}

Result<std::optional<ToolkitSet>> find_toolkit_set(Context& ctx) {
  auto bundle = ctx.bundle();
  if (!bundle) return bundle.error();
  if (*bundle == nullptr) return std::optional<ToolkitSet>();
  const VerifiedBundle& vb = **bundle;
  ToolkitSet set;
  set.pm = detect_package_manager(ctx.host.fs());
  set.machine = host_machine();
  set.arch = package_arch(set.pm.family, set.machine);
  set.carried = carried_text(vb.toolkit_packages);
  if (set.pm.family.empty() || set.arch.empty())
    return std::optional<ToolkitSet>(std::move(set));
  // The manifest parser allows one package of a name per family+arch
  // (bundle/manifest.cpp), so each name is found at most once.
  for (const auto name : kToolkitPackageNames) {
    auto it = std::find_if(vb.toolkit_packages.begin(),
                           vb.toolkit_packages.end(), [&](const auto& p) {
                             return p.family == set.pm.family &&
                                    p.arch == set.arch && p.name == name;
                           });
    if (it == vb.toolkit_packages.end()) {
      set.entries.clear();
      set.paths.clear();
      set.sizes.clear();
      return std::optional<ToolkitSet>(std::move(set));
    }
    set.entries.push_back(*it);
    // Read in place from the verified bundle, never copied off the stick.
    set.paths.push_back(vb.dir + "/" + it->file);
    std::error_code ec;
    const auto size = std::filesystem::file_size(set.paths.back(), ec);
    set.sizes.push_back(ec ? 0 : size);
    if (name == kToolkitPackageNames[0]) set.version = it->version;
  }
  read_installed(ctx, set);
  return std::optional<ToolkitSet>(std::move(set));
}

ToolkitSet host_toolkit_state(Context& ctx) {
  ToolkitSet set;
  set.pm = detect_package_manager(ctx.host.fs());
  set.machine = host_machine();
  set.arch = package_arch(set.pm.family, set.machine);
  set.carried = "no bundle";
  if (!set.pm.family.empty()) read_installed(ctx, set);
  return set;
}

}  // namespace gpunode
