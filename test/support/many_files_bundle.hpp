// A signed bundle of many small files, written by hand (bundle create lays
// out only images, manifests and the binary): for verify's limits on open
// files and memory at any file count (issues 11 and 24), in tests and in
// test/bench.
#pragma once

#include <cstddef>
#include <string>

#include "test_support.hpp"

namespace gpunode::test {

struct ManyFilesBundle {
  TempDir tmp;
  std::string dir = tmp.path() + "/bundle";
  std::string pub = tmp.path() + "/publisher.pub";  // the signer's key

  // `count` files of a few bytes each, in directories of 200, listed and
  // signed in bundle.toml. Throws std::runtime_error when that fails.
  explicit ManyFilesBundle(std::size_t count);
};

}  // namespace gpunode::test
