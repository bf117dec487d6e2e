// libFuzzer target: the .deb and .rpm readers of `bundle create
// --toolkit-packages` (bundle/deb_package.cpp, bundle/rpm_package.cpp), on
// files from outside. Input that starts like a package goes through
// read_package_info_bytes; anything else is a control file for
// parse_deb_control (so the fuzzer need not get through ar, tar and gzip
// to reach it). Whatever is accepted must make a safe bundle file name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gpunode/package_formats.hpp"
#include "gpunode/toolkit_package_set.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const bool package =
      gpunode::sniff_package_format(in.substr(
          0, gpunode::kPackageMagicBytes)) != gpunode::PackageFormat::kNeither;
  auto info = package ? gpunode::read_package_info_bytes(in, "fuzz")
                      : gpunode::parse_deb_control(in, "fuzz");
  if (!info) {
    if (info.error().exit != gpunode::ExitCode::kUsage) std::abort();
    return 0;
  }
  // packages/<family>/<one name>: no further '/', no "..", no control bytes.
  const std::string file = gpunode::bundle::package_bundle_file(*info);
  const std::string_view name =
      std::string_view(file).substr(file.find('/', 9) + 1);
  if (name.find('/') != std::string_view::npos || name.rfind("..", 0) == 0 ||
      name.front() == '.')
    std::abort();
  for (unsigned char c : name) {
    if (c < 0x21 || c >= 0x7f) std::abort();
  }
  return 0;
}
