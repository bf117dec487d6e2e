#include "plugin/manifest_texts.hpp"

#include "manifests_data.hpp"

namespace gpunode {

ManifestTexts ManifestTexts::built_in() {
  return {kRuntimeClassManifest, kDevicePluginManifest, kTimeSlicingManifest,
          "built-in"};
}

}  // namespace gpunode
