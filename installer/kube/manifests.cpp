#include "kube/manifests.hpp"

#include <yaml-cpp/yaml.h>

#include <cctype>

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

void label_managed(json& object) {
  object["metadata"]["labels"][kManagedByLabel] = "gpunode";
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
