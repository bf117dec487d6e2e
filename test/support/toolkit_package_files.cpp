#include "toolkit_package_files.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "test_support.hpp"

namespace gpunode::test {

std::vector<std::string> make_toolkit_packages(const std::string& dir,
                                               const std::string& family,
                                               const std::string& version,
                                               const std::string& arch) {
  const std::string script =
      std::string(GPUNODE_TEST_FIXTURES) + "/../tools/make-toolkit-packages.sh";
  Run r = run_with_sim({"bash", script, dir, "--family", family, "--version",
                        version, "--arch", arch});
  if (r.exit_code != 0) {
    throw std::runtime_error("make-toolkit-packages.sh failed: " + r.err);
  }
  std::vector<std::string> paths;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) paths.push_back(line);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace gpunode::test
