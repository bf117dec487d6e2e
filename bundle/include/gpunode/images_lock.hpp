// images/images.lock, compiled in: which images gpunode installs.
#pragma once

#include <string>
#include <vector>

namespace gpunode {

struct LockedImage {
  std::string name;  // e.g. "device-plugin"
  std::string ref;
  std::string digest;  // may be empty
  std::vector<std::string> platforms;
};

// Throws nothing: a broken lock file fails the build's tests, and the
// accessor then returns the built-in fallback below.
const LockedImage& locked_device_plugin_image();
const LockedImage& locked_cuda_sample_image();

}  // namespace gpunode
