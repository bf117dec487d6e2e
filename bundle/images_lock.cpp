#include "gpunode/images_lock.hpp"

#include <toml++/toml.h>

#include "images_lock_data.hpp"

namespace gpunode {
namespace {

LockedImage read_locked(const std::string& name,
                        const std::string& fallback_ref) {
  LockedImage img{name, fallback_ref, "", {}};
  try {
    toml::table lock = toml::parse(kImagesLockText);
    if (auto* t = lock["images"][name].as_table()) {
      img.ref = (*t)["ref"].value_or(img.ref);
      img.digest = (*t)["digest"].value_or(std::string());
      if (auto* p = (*t)["platforms"].as_array()) {
        for (const auto& v : *p)
          img.platforms.push_back(v.value_or(std::string()));
      }
    }
  } catch (const toml::parse_error&) {
    // A unit test reads the lock itself; a broken one keeps the fallback.
  }
  return img;
}

}  // namespace

const LockedImage& locked_device_plugin_image() {
  static const LockedImage image =
      read_locked("device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  return image;
}

const LockedImage& locked_cuda_sample_image() {
  static const LockedImage image = read_locked(
      "cuda-sample", "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0");
  return image;
}

}  // namespace gpunode
