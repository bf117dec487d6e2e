// What `bundle create` copies to run gpunode from the stick. A plain build
// is one file, /proc/self/exe. Under the portable launcher /proc/self/exe is
// glibc's loader in <tree>/lib/gpunode/, so the whole tree goes instead:
// <tree>/bin/gpunode (the launcher) and every file in <tree>/lib/gpunode/.
#pragma once

#include <string>
#include <vector>

#include "gpunode/result.hpp"

namespace gpunode {

struct SelfFiles {
  std::string binary;                      // copied as bin/gpunode
  std::vector<std::string> runtime_files;  // copied to lib/gpunode/
};

// `exe` is what /proc/self/exe names.
SelfFiles self_files_for(const std::string& exe);

Result<SelfFiles> locate_self();

}  // namespace gpunode
