#include "kube/manifests.hpp"

#include <yaml-cpp/yaml.h>

#include <cctype>

#include "gpunode/digest.hpp"
#include "manifests_data.hpp"

namespace gpunode {
namespace {

using kube::json;

json scalar_to_json(const YAML::Node& n) {
  const std::string v = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted: always a string
  if (v == "true" || v == "True") return true;
  if (v == "false" || v == "False") return false;
  if (v == "null" || v == "~" || v.empty()) return nullptr;
  bool digits = !v.empty();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!(std::isdigit(static_cast<unsigned char>(v[i])) ||
          (i == 0 && v[i] == '-'))) {
      digits = false;
    }
  }
  if (digits && v != "-" && v.size() < 18) return std::stoll(v);
  return v;
}

json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : n) out[kv.first.Scalar()] = to_json(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : n) out.push_back(to_json(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      return scalar_to_json(n);
    default:
      return nullptr;
  }
}

void label_managed(json& object) {
  object["metadata"]["labels"][kManagedByLabel] = "gpunode";
}

// The device plugin's own config file: renameByDefault belongs under
// sharing.timeSlicing (under `flags` the plugin ignores it; device-plugin
// #1433), replicas must be >= 2 (checked by the flags already).
Result<std::string> render_plugin_config(const std::string& text, int replicas,
                                         bool rename) {
  try {
    YAML::Node config = YAML::Load(text);
    YAML::Node slicing = config["sharing"]["timeSlicing"];
    slicing["renameByDefault"] = rename;
    bool found = false;
    for (auto resource : slicing["resources"]) {
      if (resource["name"].as<std::string>() == "nvidia.com/gpu") {
        resource["replicas"] = replicas;
        found = true;
      }
    }
    if (!found) {
      return Error{
          ExitCode::kUsage,
          "plugin",
          "the time-slicing manifest's config has no resource nvidia.com/gpu",
          {}};
    }
    YAML::Emitter out;
    out << config;
    return std::string(out.c_str()) + "\n";
  } catch (const YAML::Exception& e) {
    return Error{
        ExitCode::kUsage,
        "plugin",
        "the time-slicing manifest's config.yaml is not valid YAML: " + e.msg,
        {}};
  }
}

}  // namespace

Result<std::vector<json>> yaml_documents(const std::string& yaml,
                                         const std::string& source) {
  try {
    std::vector<json> docs;
    for (const auto& node : YAML::LoadAll(yaml)) {
      if (node.IsNull()) continue;
      docs.push_back(to_json(node));
    }
    return docs;
  } catch (const YAML::Exception& e) {
    return Error{ExitCode::kUsage,
                 "plugin",
                 source + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg,
                 {}};
  }
}

ManifestTexts ManifestTexts::built_in() {
  return {kRuntimeClassManifest, kDevicePluginManifest, kTimeSlicingManifest,
          "built-in"};
}

Result<json> render_runtimeclass(const ManifestTexts& texts) {
  auto docs =
      yaml_documents(texts.runtimeclass, "manifests/runtimeclass-nvidia.yml");
  if (!docs) return docs.error();
  json rc = docs->at(0);
  label_managed(rc);
  return rc;
}

Result<RenderedPlugin> render_device_plugin(const Options& opts,
                                            const std::string& plugin_image,
                                            const ManifestTexts& texts) {
  const bool slicing = opts.variant == Variant::kTimeSlicing;
  auto docs =
      slicing ? yaml_documents(texts.time_slicing,
                               "manifests/nvidia-device-plugin-timeSlicing.yml")
              : yaml_documents(texts.device_plugin,
                               "manifests/nvidia-device-plugin.yml");
  if (!docs) return docs.error();
  RenderedPlugin out;
  out.replicas = slicing ? opts.replicas : 1;
  out.resource = slicing && opts.rename_shared ? "nvidia.com/gpu.shared"
                                               : "nvidia.com/gpu";
  for (auto& doc : *docs) {
    const std::string kind = doc.value("kind", "");
    if (kind == "ConfigMap") {
      auto config =
          render_plugin_config(doc["data"]["config.yaml"].get<std::string>(),
                               opts.replicas, opts.rename_shared);
      if (!config) return config.error();
      doc["data"]["config.yaml"] = *config;
      label_managed(doc);
      out.configmap = doc;
    } else if (kind == "DaemonSet") {
      out.daemonset = doc;
    }
  }
  if (out.daemonset.is_null()) {
    return Error{ExitCode::kUsage,
                 "plugin",
                 "the device plugin manifest has no DaemonSet",
                 {}};
  }
  // The plugin reads its config only at start: a digest of it on the pod
  // template makes every config change a new template, so the DaemonSet
  // controller restarts the pods (no manual `rollout restart`).
  out.config_hash = sha256_hex(out.configmap ? out.configmap->at("data").dump()
                                             : std::string("variant=default"));
  json& ds = out.daemonset;
  label_managed(ds);
  ds["spec"]["template"]["metadata"]["annotations"][kConfigHashAnnotation] =
      out.config_hash;
  for (auto& c : ds["spec"]["template"]["spec"]["containers"]) {
    if (c.value("name", "") == "nvidia-device-plugin-ctr")
      c["image"] = plugin_image;
  }
  return out;
}

std::string object_path(const json& object) {
  const std::string api_version = object.value("apiVersion", "v1");
  std::string kind = object.value("kind", "");
  std::string plural;
  for (char c : kind)
    plural += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // RuntimeClass -> runtimeclasses; the kinds gpunode touches need no more.
  plural += plural.back() == 's' ? "es" : "s";
  std::string path = api_version.find('/') == std::string::npos
                         ? "/api/" + api_version
                         : "/apis/" + api_version;
  const json& meta = object.at("metadata");
  if (meta.contains("namespace"))
    path += "/namespaces/" + meta["namespace"].get<std::string>();
  return path + "/" + plural + "/" + meta.value("name", "");
}

bool holds_all_of(const json& live, const json& desired) {
  if (desired.is_object()) {
    if (!live.is_object()) return false;
    for (const auto& [key, value] : desired.items()) {
      auto it = live.find(key);
      if (it == live.end()) {
        if (value.is_null()) continue;
        return false;
      }
      if (!holds_all_of(*it, value)) return false;
    }
    return true;
  }
  if (desired.is_array()) {
    if (!live.is_array() || live.size() != desired.size()) return false;
    for (std::size_t i = 0; i < desired.size(); ++i) {
      if (!holds_all_of(live[i], desired[i])) return false;
    }
    return true;
  }
  if (desired.is_number() && live.is_number()) return desired == live;
  return desired == live;
}

std::string first_difference(const json& live, const json& desired,
                             const std::string& at) {
  if (desired.is_object() && live.is_object()) {
    for (const auto& [key, value] : desired.items()) {
      const std::string path = at.empty() ? key : at + "." + key;
      auto it = live.find(key);
      if (it == live.end()) {
        if (value.is_null()) continue;
        return path + " is missing";
      }
      std::string d = first_difference(*it, value, path);
      if (!d.empty()) return d;
    }
    return "";
  }
  if (desired.is_array() && live.is_array() && desired.size() == live.size()) {
    for (std::size_t i = 0; i < desired.size(); ++i) {
      std::string d = first_difference(live[i], desired[i],
                                       at + "[" + std::to_string(i) + "]");
      if (!d.empty()) return d;
    }
    return "";
  }
  if (holds_all_of(live, desired)) return "";
  std::string shown = live.dump();
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  return at + " is " + shown;
}

}  // namespace gpunode
