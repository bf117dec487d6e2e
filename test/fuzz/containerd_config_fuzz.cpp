// libFuzzer target: the check of k3s's rendered containerd config.toml
// (toml++ parse, version and runtime extraction). Any input must give a
// config or an Error, never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "containerd/containerd_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = gpunode::parse_containerd_config(text, "config.toml");
  if (config) {
    // What the handler stage asks next.
    (void)config->runtime("nvidia");
    (void)config->runtime_options_header("nvidia");
  }
  return 0;
}
