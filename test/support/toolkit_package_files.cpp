#include "toolkit_package_files.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "test_support.hpp"

namespace gpunode::test {

std::vector<std::string> make_toolkit_packages(
    const std::string& dir, const std::string& family,
    const std::string& version, const std::string& arch,
    const std::string& postinst_sleep) {
  const std::string script =
      std::string(GPUNODE_TEST_FIXTURES) + "/../tools/make-toolkit-packages.sh";
  std::vector<std::string> argv{"bash",     script,   dir,
                                "--family", family,   "--version",
                                version,    "--arch", arch};
  if (!postinst_sleep.empty())
    argv.insert(argv.end(), {"--postinst-sleep", postinst_sleep});
  Run r = run_with_sim(argv);
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

void write_deb_bomb(const std::string& path, const std::string& control,
                    std::int64_t expanded, BombPad pad) {
  std::string tar;
  archive* w = archive_write_new();
  archive_write_set_format_pax_restricted(w);
  archive_write_add_filter_zstd(w);
  archive_write_set_filter_option(w, "zstd", "compression-level", "1");
  archive_write_set_bytes_in_last_block(w, 1);
  archive_write_open(
      w, &tar, nullptr,
      [](archive*, void* out, const void* buf, size_t n) -> la_ssize_t {
        static_cast<std::string*>(out)->append(static_cast<const char*>(buf),
                                               n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  auto add = [&](const char* name, std::int64_t size, const std::string& body) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, size);
    if (archive_write_header(w, e) != ARCHIVE_OK)
      throw std::runtime_error("write_deb_bomb: cannot write a tar header");
    if (!body.empty()) {
      archive_write_data(w, body.data(), body.size());
    } else {
      const std::string zeros(1 << 20, '\0');
      for (std::int64_t done = 0; done < size; done += zeros.size())
        archive_write_data(w, zeros.data(), zeros.size());
    }
    archive_entry_free(e);
  };
  const auto control_size = static_cast<std::int64_t>(control.size());
  if (pad == BombPad::kBeforeControl) add("./big", expanded, "");
  add("./control", control_size, control);
  if (pad == BombPad::kAfterControl) add("./big", expanded, "");
  archive_write_close(w);
  archive_write_free(w);
  // deb(5): an ar archive of debian-binary, control.tar.zst, data.tar.
  auto member = [](const std::string& name, const std::string& body) {
    char header[61];
    std::snprintf(header, sizeof header, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n",
                  name.c_str(), "0", "0", "0", "100644", body.size());
    return std::string(header, 60) + body + (body.size() % 2 ? "\n" : "");
  };
  std::ofstream(path, std::ios::binary)
      << "!<arch>\n" + member("debian-binary", "2.0\n") +
             member("control.tar.zst", tar) + member("data.tar", "");
}

}  // namespace gpunode::test
