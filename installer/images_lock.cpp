#include "gpunode/images_lock.hpp"

#include <toml++/toml.h>

#include "images_lock_data.hpp"

namespace gpunode {

const LockedImage& locked_device_plugin_image() {
  static const LockedImage image = [] {
    LockedImage img{
        "device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.19.3", "", {}};
    try {
      toml::table lock = toml::parse(kImagesLockText);
      if (auto* t = lock["images"]["device-plugin"].as_table()) {
        img.ref = (*t)["ref"].value_or(img.ref);
        img.digest = (*t)["digest"].value_or(std::string());
        if (auto* p = (*t)["platforms"].as_array()) {
          for (const auto& v : *p)
            img.platforms.push_back(v.value_or(std::string()));
        }
      }
    } catch (const toml::parse_error&) {
      // Covered by a unit test on the lock itself; keep the fallback.
    }
    return img;
  }();
  return image;
}

}  // namespace gpunode
