#include "gpunode/images_lock.hpp"

#include <catch2/catch.hpp>

TEST_CASE("images.lock is compiled in and names the pinned device plugin",
          "[lock]") {
  const auto& image = gpunode::locked_device_plugin_image();
  CHECK(image.ref == "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  CHECK(image.digest.rfind("sha256:", 0) == 0);
  CHECK(image.digest.size() == 71);
  CHECK(image.platforms ==
        std::vector<std::string>{"linux/amd64", "linux/arm64"});
}
