#include "gpunode/state_dir.hpp"

#include "gpunode/path_safety.hpp"

namespace gpunode {

Result<void> check_state_dir_safe(const FileSystem& fs,
                                  const std::string& state_dir) {
  auto bad = find_unsafe_component(fs, state_dir);
  if (!bad) return {};
  return Error{ExitCode::kCannotRun, "preflight",
               "state dir " + state_dir + " is not safe for root to write: " +
                   bad->path + " " + bad->why +
                   ", so someone other than root could replace what gpunode "
                   "writes there",
               bad->fix +
                   ", or choose a --state-dir whose every parent only root "
                   "can change"};
}

Result<void> prepare_state_dir(FileSystem& fs, const std::string& state_dir) {
  // Before creating anything: a directory made under an unsafe parent would
  // be a change the refusal leaves behind.
  if (auto r = check_state_dir_safe(fs, state_dir); !r) return r;
  if (auto r = fs.create_directories(state_dir); !r) return r;
  return check_state_dir_safe(fs, state_dir);
}

}  // namespace gpunode
