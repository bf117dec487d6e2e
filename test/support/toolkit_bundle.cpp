#include "toolkit_bundle.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "gpunode/digest.hpp"
#include "gpunode/toolkit_packages.hpp"
#include "test_support.hpp"
#include "toolkit_package_files.hpp"

namespace gpunode::test {

std::vector<BuiltPackage> make_bundle_packages(const std::string& out,
                                               const std::string& family,
                                               const std::string& version,
                                               const std::string& arch) {
  make_toolkit_packages(out, family, version, arch);
  const std::string rpm_arch = arch == "amd64" ? "x86_64" : "aarch64";
  std::vector<BuiltPackage> built;
  for (const auto name : kToolkitPackageNames) {
    BuiltPackage p;
    p.entry.family = family;
    p.entry.name = std::string(name);
    p.entry.version = version;
    p.entry.arch = family == "deb" ? arch : rpm_arch;
    // The builder's file names (make-toolkit-packages.sh).
    const std::string base =
        family == "deb"
            ? p.entry.name + "_" + version + "_" + arch + ".deb"
            : p.entry.name + "-" + version + "." + rpm_arch + ".rpm";
    p.entry.file = "packages/" + family + "/" + base;
    p.source = out + "/" + base;
    p.entry.sha256 = sha256_hex(read_text(p.source));
    built.push_back(std::move(p));
  }
  return built;
}

void write_toolkit_bundle(const std::string& dir,
                          const std::vector<BuiltPackage>& packages) {
  bundle::Manifest m;
  m.created = "2026-12-02T00:00:00Z";
  m.gpunode_version = "0.1.0";
  for (const auto& p : packages) {
    const std::string to = dir + "/" + p.entry.file;
    std::filesystem::create_directories(
        std::filesystem::path(to).parent_path());
    std::filesystem::copy_file(p.source, to);
    const std::string data = read_text(to);
    // One chunk: a stand-in package is far below bundle::kChunkBytes.
    m.files.push_back(
        {p.entry.file, data.size(), p.entry.sha256, {p.entry.sha256}});
    m.packages.push_back(p.entry);
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  write_text(dir + "/bundle.toml", bundle::write_manifest(m));
}

}  // namespace gpunode::test
