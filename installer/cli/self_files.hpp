// What `bundle create` copies to run gpunode from the stick. A plain build
// is one file, /proc/self/exe. Under the portable launcher /proc/self/exe is
// glibc's loader in <tree>/lib/gpunode/, so the whole tree goes instead:
// <tree>/bin/gpunode (the launcher), every file in <tree>/lib/gpunode/ and,
// when the tree has it, the Ansible collection (packaging/ansible/) that
// build-portable.sh put under <tree>/share/ansible/collections/.
#pragma once

#include <string>
#include <vector>

#include "gpunode/result.hpp"

namespace gpunode {

struct SelfFiles {
  std::string binary;                      // copied as bin/gpunode
  std::vector<std::string> runtime_files;  // copied to lib/gpunode/
  // <tree>/share/ansible/collections, or "" when the tree has no collection.
  std::string collections_root;
  // Below collections_root, sorted: every entry that is not a directory
  // (a symlink too, so that bundle create can refuse it by name).
  std::vector<std::string> collection_files;
};

// `exe` is what /proc/self/exe names. Errors: ExitCode::kBlocked when the
// collection cannot be listed.
Result<SelfFiles> self_files_for(const std::string& exe);

Result<SelfFiles> locate_self();

}  // namespace gpunode
