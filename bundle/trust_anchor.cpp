#include "gpunode/trust_anchor.hpp"

#include <limits.h>
#include <unistd.h>

#include "gpunode/path_safety.hpp"

namespace gpunode {

Result<void> check_trust_anchor(const std::string& path,
                                const std::string& what,
                                const std::string& otherwise) {
  std::string absolute = path;
  if (absolute.empty() || absolute.front() != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) != nullptr)
      absolute = std::string(cwd) + "/" + path;
  }
  auto bad = find_unsafe_component(absolute);
  if (!bad) return {};
  return Error{
      ExitCode::kCannotRun, "trust",
      what + " " + path + " is not a trust anchor: " + bad->path + " " +
          bad->why + ", so someone other than root could " + "replace " +
          (bad->path == absolute ? "it" : "what it holds"),
      otherwise.empty() ? bad->fix : bad->fix + " (or " + otherwise + ")"};
}

}  // namespace gpunode
