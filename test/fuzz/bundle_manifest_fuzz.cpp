// libFuzzer target: bundle.toml as read from the USB stick (before the
// signature says anything about it). A parsed manifest must also survive
// being written out and read back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gpunode/bundle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto manifest = gpunode::bundle::parse_manifest(text, "bundle.toml");
  if (manifest) {
    // write_manifest is what `bundle create` signs: what was accepted must
    // round-trip, or a re-signed bundle would not verify.
    const std::string again = gpunode::bundle::write_manifest(*manifest);
    if (!gpunode::bundle::parse_manifest(again, "rewritten")) std::abort();
  }
  return 0;
}
