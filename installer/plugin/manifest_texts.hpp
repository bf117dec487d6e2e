// The three manifest texts a run installs: compiled in (manifests/*.yml),
// or the verified bundle's (RunContext::manifests()).
#pragma once

#include <string>

namespace gpunode {

struct ManifestTexts {
  std::string runtimeclass;
  std::string device_plugin;
  std::string time_slicing;
  std::string origin;  // for messages: "built-in" or the bundle's path

  static ManifestTexts built_in();
};

}  // namespace gpunode
