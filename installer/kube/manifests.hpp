// Kubernetes objects as data: YAML documents to JSON, API paths, and the
// comparisons that decide whether applying an object would change anything.
// Knows nothing of stages or flags (the device plugin's wanted state is
// plugin/device_plugin_plan.hpp's).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpunode/kube.hpp"

namespace gpunode {

inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";

// YAML (one or more documents) to JSON, keeping YAML's types: quoted
// scalars stay strings ("false" in an env value), plain ones become
// booleans, integers or null where they read as such.
Result<std::vector<kube::json>> yaml_documents(const std::string& yaml,
                                               const std::string& source);

// Marks an object as gpunode's (kManagedByLabel): uninstall removes only
// what carries it.
void label_managed(kube::json& object);

// The API path of an object: /api/v1/namespaces/NS/configmaps/NAME, ...
std::string object_path(const kube::json& object);

// True when every field `desired` sets has the same value in `live`: what
// the server added (defaults, status, metadata) does not count, so a live
// object that already holds everything we would apply needs no write.
bool holds_all_of(const kube::json& live, const kube::json& desired);

// Where they first differ, as a field path ("spec.template.spec.
// runtimeClassName"), for messages; empty when holds_all_of() is true.
std::string first_difference(const kube::json& live, const kube::json& desired,
                             const std::string& at = "");

}  // namespace gpunode
