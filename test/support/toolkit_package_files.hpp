// Stand-ins for NVIDIA's container toolkit packages, built by
// test/tools/make-toolkit-packages.sh with the real dpkg-deb / rpmbuild
// (scripts/setup.sh installs both: missing, the test fails).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpunode::test {

// Builds the four packages into `dir` and returns their paths, sorted.
// Throws when the script fails. `postinst_sleep` (deb, seconds): the
// script's --postinst-sleep, a slow nvidia-container-toolkit postinst.
std::vector<std::string> make_toolkit_packages(
    const std::string& dir, const std::string& family = "deb",
    const std::string& version = "1.17.8-1", const std::string& arch = "amd64",
    const std::string& postinst_sleep = "");

// Where the zeros of write_deb_bomb go in control.tar.
enum class BombPad { kBeforeControl, kAfterControl };

// A .deb whose control.tar.zst holds `expanded` bytes of zeros (./big)
// before (or after) its ./control: a decompression bomb, about 40 KiB per
// GiB.
void write_deb_bomb(const std::string& path, const std::string& control,
                    std::int64_t expanded,
                    BombPad pad = BombPad::kBeforeControl);

}  // namespace gpunode::test
