#include "cli/self_files.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpunode {

namespace fs = std::filesystem;

SelfFiles self_files_for(const std::string& exe) {
  const fs::path p(exe);
  const fs::path lib = p.parent_path();
  const fs::path launcher = lib.parent_path().parent_path() / "bin" / "gpunode";
  std::error_code ec;
  const bool portable = p.filename().string().rfind("ld-linux", 0) == 0 &&
                        lib.filename() == "gpunode" &&
                        lib.parent_path().filename() == "lib" &&
                        fs::is_regular_file(lib / "gpunode", ec) &&
                        fs::is_regular_file(launcher, ec);
  if (!portable) return SelfFiles{exe, {}};
  SelfFiles out{launcher.string(), {}};
  for (const auto& entry : fs::directory_iterator(lib, ec)) {
    if (entry.is_regular_file(ec)) out.runtime_files.push_back(entry.path());
  }
  // Sorted, so bundles stay reproducible.
  std::sort(out.runtime_files.begin(), out.runtime_files.end());
  return out;
}

Result<SelfFiles> locate_self() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return Error{ExitCode::kBlocked,
                 "bundle",
                 std::string("cannot find this binary (/proc/self/exe): ") +
                     std::strerror(errno),
                 {}};
  return self_files_for(std::string(self, static_cast<std::size_t>(n)));
}

}  // namespace gpunode
