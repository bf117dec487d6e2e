// read_package_info over the stand-in packages (real dpkg-deb / rpmbuild
// output) and over crafted bytes: the format comes from the content, and
// every malformed or hostile input is refused with its exact exit code.
#include "gpunode/toolkit_packages.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <tuple>

#include "gpunode/interrupt.hpp"
#include "gpunode/package_formats.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"
#include "toolkit_package_files.hpp"

using namespace gpunode;
using gpunode::test::make_toolkit_packages;
using gpunode::test::read_text;
using gpunode::test::tar_of;
using gpunode::test::TempDir;
using gpunode::test::write_text;

namespace {

// An ar archive in deb(5)'s common format, written by hand: "!<arch>\n",
// then per member a 60-byte header (name with a trailing '/', mtime, uid,
// gid, octal mode, size, "`\n") and the data, padded to an even size.
std::string ar_of(
    const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out = "!<arch>\n";
  for (const auto& [name, data] : members) {
    char h[61];
    std::snprintf(h, sizeof h, "%-16s%-12d%-6d%-6d%-8s%-10zu`\n",
                  (name + "/").c_str(), 0, 0, 0, "100644", data.size());
    out += std::string(h, 60) + data;
    if (data.size() % 2) out += '\n';
  }
  return out;
}

// A .deb laid out as deb(5) says, with `control` as its ./control in an
// uncompressed control.tar (the stand-ins cover the compressed ones).
std::string crafted_deb(const std::string& control) {
  return ar_of({{"debian-binary", "2.0\n"},
                {"control.tar", tar_of({{"./control", control}})},
                {"data.tar", tar_of({})}});
}

const std::string kControl =
    "Package: libnvidia-container1\n"
    "Version: 1.17.8-1\n"
    "Architecture: amd64\n"
    "Depends: libc6 (>= 2.7),\n"
    " libseccomp2\n"
    "Description: the library\n"
    " more text\n";

void be32(std::string& s, std::uint32_t v) {
  for (int shift : {24, 16, 8, 0}) s += static_cast<char>((v >> shift) & 0xff);
}

struct Tag {
  std::uint32_t tag, type, offset, count;
};

// A header structure: the given index entries over `data`; il and dl as
// given when non-zero (to lie about them), else the real ones.
std::string header(const std::vector<Tag>& tags, const std::string& data,
                   std::uint32_t il = 0, std::uint32_t dl = 0) {
  std::string h("\x8e\xad\xe8\x01\0\0\0\0", 8);
  be32(h, il ? il : static_cast<std::uint32_t>(tags.size()));
  be32(h, dl ? dl : static_cast<std::uint32_t>(data.size()));
  for (const Tag& t : tags) {
    be32(h, t.tag);
    be32(h, t.type);
    be32(h, t.offset);
    be32(h, t.count);
  }
  return h + data;
}

// An .rpm: lead, an empty signature header (padded), then `main`.
std::string crafted_rpm(const std::string& main) {
  std::string lead(96, '\0');
  lead.replace(0, 4, "\xed\xab\xee\xdb");
  lead[4] = 3;
  lead[79] = 5;                         // header-style signature
  return lead + header({}, "") + main;  // 16 bytes: already 8-aligned
}

// NAME, VERSION, RELEASE, ARCH and SOURCERPM as strings.
std::string rpm_main(const std::string& name = "libnvidia-container1",
                     const std::string& arch = "x86_64") {
  std::string data;
  std::vector<Tag> tags;
  for (auto [tag, value] : std::vector<std::pair<std::uint32_t, std::string>>{
           {1000, name},
           {1001, "1.17.8"},
           {1002, "1"},
           {1022, arch},
           {1044, "x.src.rpm"}}) {
    tags.push_back({tag, 6, static_cast<std::uint32_t>(data.size()), 1});
    data += value + '\0';
  }
  return header(tags, data);
}

// The error of reading `bytes` (which must fail).
Error refusal(const std::string& bytes) {
  auto r = read_package_info_bytes(bytes, "pkg");
  REQUIRE_FALSE(r);
  return r.error();
}

}  // namespace

TEST_CASE("the stand-in .debs and .rpms read as what they are, both arches",
          "[toolkit-packages]") {
  TempDir tmp;
  for (auto [family, arch, said] :
       {std::tuple<const char*, const char*, const char*>{"deb", "amd64",
                                                          "amd64"},
        {"deb", "arm64", "arm64"},
        {"rpm", "amd64", "x86_64"},
        {"rpm", "arm64", "aarch64"}}) {
    const std::string dir = tmp.path() + "/" + family + arch;
    const auto files = make_toolkit_packages(dir, family, "1.17.8-1", arch);
    REQUIRE(files.size() == 4);
    std::set<std::string> names;
    for (const auto& f : files) {
      INFO(f);
      auto info = read_package_info(f);
      REQUIRE(info);
      CHECK(info->family == family);
      CHECK(info->version == "1.17.8-1");
      CHECK(info->arch == said);
      names.insert(info->name);
      // The same bytes from memory say the same.
      auto again = read_package_info_bytes(read_text(f), f);
      REQUIRE(again);
      CHECK(again->name == info->name);
    }
    CHECK(names == std::set<std::string>(kToolkitPackageNames.begin(),
                                         kToolkitPackageNames.end()));
  }
}

TEST_CASE("a package's format comes from its content, not its name",
          "[toolkit-packages]") {
  TempDir tmp;
  const auto debs = make_toolkit_packages(tmp.path() + "/deb");
  const std::string renamed = tmp.path() + "/looks-like.rpm";
  std::filesystem::copy_file(debs[0], renamed);
  auto info = read_package_info(renamed);
  REQUIRE(info);
  CHECK(info->family == "deb");
  write_text(tmp.path() + "/text.deb", "Package: x\nVersion: 1\n");
  auto text = read_package_info(tmp.path() + "/text.deb");
  REQUIRE_FALSE(text);
  CHECK(text.error().exit == ExitCode::kUsage);
  CHECK_THAT(text.error().message,
             Catch::Contains("neither a .deb nor an .rpm"));
  // Missing and unreadable are the machine's problem, not the input's.
  auto missing = read_package_info(tmp.path() + "/none.deb");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().exit == ExitCode::kBlocked);
  auto dir = read_package_info(tmp.path());
  REQUIRE_FALSE(dir);
  CHECK(dir.error().exit == ExitCode::kUsage);
  // A FIFO is refused at once (opening one must not wait for a writer).
  REQUIRE(::mkfifo((tmp.path() + "/fifo.deb").c_str(), 0644) == 0);
  auto fifo = read_package_info(tmp.path() + "/fifo.deb");
  REQUIRE_FALSE(fifo);
  CHECK(fifo.error().exit == ExitCode::kUsage);
  CHECK_THAT(fifo.error().message, Catch::Contains("not a regular file"));
}

TEST_CASE("truncated packages are refused as such", "[toolkit-packages]") {
  TempDir tmp;
  for (const char* family : {"deb", "rpm"}) {
    const auto files = make_toolkit_packages(tmp.path() + "/" + family, family);
    const std::string whole = read_text(files[0]);
    // Cut in the first member (deb) or the lead, in the control member's
    // header or the signature, and in the control data or the main header.
    for (std::size_t keep : {30, 100, 400}) {
      INFO(family << " cut at " << keep);
      const Error e = refusal(whole.substr(0, keep));
      CHECK(e.exit == ExitCode::kUsage);
    }
  }
  CHECK_THAT(refusal(crafted_rpm(rpm_main()).substr(0, 150)).message,
             Catch::Contains("truncated"));
}

TEST_CASE("a crafted .deb control file is read, a bad one refused",
          "[toolkit-packages]") {
  auto good = read_package_info_bytes(crafted_deb(kControl), "good.deb");
  REQUIRE(good);
  CHECK(good->name == "libnvidia-container1");
  CHECK(good->version == "1.17.8-1");
  CHECK(good->arch == "amd64");

  struct Case {
    std::string bytes, says;
  };
  const std::vector<Case> cases = {
      {crafted_deb("Package: libnvidia-container1\nArchitecture: amd64\n"),
       "its control file has no Version"},
      {crafted_deb("Package: libnvidia-container1\nVersion: 1.0\x1b[2J\n"
                   "Architecture: amd64\n"),
       "its version holds a control character: \"1.0\\e[2J\""},
      {crafted_deb("Package: libnvidia-container1\nVersion: 1.0\r\n"
                   "Architecture: amd64\n"),
       "its version holds a control character: \"1.0\\r\""},
      {crafted_deb("Package: libnvidia-container1\nVersion: 1.0\n"
                   " 2.0\nArchitecture: amd64\n"),
       "its control field Version spans lines"},
      {crafted_deb("Package: a\nPackage: b\n"), "repeats the field Package"},
      {crafted_deb("Package: Libnvidia\nVersion: 1.0\nArchitecture: amd64\n"),
       "is not a Debian package name"},
      {crafted_deb("Package: libnvidia-container1\nVersion: 1.0/../x\n"
                   "Architecture: amd64\n"),
       "is not a Debian version"},
      {crafted_deb(" continued\n"), "continues no field"},
      // The first stanza only: a second one cannot supply the Version.
      {crafted_deb("Package: libnvidia-container1\nArchitecture: amd64\n\n"
                   "Version: 1.0\n"),
       "its control file has no Version"},
      {ar_of({{"debian-binary", "3.0\n"}}), "only 2.x is known"},
      {ar_of({{"debian-binary", "2.0\n"}, {"data.tar", ""}}),
       "its second member is \"data.tar\""},
  };
  for (const auto& c : cases) {
    INFO(c.says);
    const Error e = refusal(c.bytes);
    CHECK(e.exit == ExitCode::kUsage);
    CHECK_THAT(e.message, Catch::Contains(c.says));
    CHECK(e.message.find('\x1b') == std::string::npos);
  }
}

TEST_CASE("a crafted .rpm header is read, hostile counts refused",
          "[toolkit-packages]") {
  auto good = read_package_info_bytes(crafted_rpm(rpm_main()), "good.rpm");
  REQUIRE(good);
  CHECK(good->family == "rpm");
  CHECK(good->name == "libnvidia-container1");
  CHECK(good->version == "1.17.8-1");
  CHECK(good->arch == "x86_64");

  const std::string name_data = std::string("libnvidia-container1") + '\0';
  struct Case {
    std::string bytes, says;
  };
  const std::vector<Case> cases = {
      // An index count past rpm's limit is refused before anything is read.
      {crafted_rpm(header({}, "", 0x10000)), "claims 65536 index entries"},
      {crafted_rpm(header({}, "", 0xffffffffu)), "claims 4294967295 index"},
      {crafted_rpm(header({}, "", 1, 0x7fffffff)), "bytes of data; at most"},
      {crafted_rpm(header({{1000, 6, 4096, 1}}, name_data)),
       "tag 1000 points at offset 4096, beyond the 21 data bytes"},
      {crafted_rpm(header({{1000, 6, 0, 1}}, "no-terminator")),
       "tag 1000 runs past the end of the data"},
      {crafted_rpm(header({{1000, 4, 0, 1}}, name_data)),
       "tag 1000 is not one string (type 4"},
      {crafted_rpm(header({{1000, 6, 0, 1}, {1000, 6, 0, 1}}, name_data)),
       "tag 1000 twice"},
      {crafted_rpm(header({{1000, 6, 0, 1}}, name_data)),
       "its header has no VERSION"},
      {crafted_rpm(rpm_main("libnvidia-container1", "x86\x1b_64")),
       "its arch holds a control character: \"x86\\e_64\""},
      {crafted_rpm(std::string(16, 'x')), "its header has no header magic"},
      // Counts that claim more than the file has.
      {crafted_rpm(header({}, "", 3, 100)), "truncated"},
  };
  for (const auto& c : cases) {
    INFO(c.says);
    const Error e = refusal(c.bytes);
    CHECK(e.exit == ExitCode::kUsage);
    CHECK_THAT(e.message, Catch::Contains(c.says));
  }
  // A source package (no SOURCERPM) is not installable.
  CHECK_THAT(refusal(crafted_rpm(header({{1000, 6, 0, 1},
                                         {1001, 6, 0, 1},
                                         {1002, 6, 0, 1},
                                         {1022, 6, 0, 1}},
                                        std::string("a1") + '\0')))
                 .message,
             Catch::Contains("source package"));
}

TEST_CASE("package_arch names the host's machine in each family's words",
          "[toolkit-packages]") {
  CHECK(package_arch("deb", "x86_64") == "amd64");
  CHECK(package_arch("rpm", "x86_64") == "x86_64");
  CHECK(package_arch("deb", "aarch64") == "arm64");
  CHECK(package_arch("rpm", "aarch64") == "aarch64");
  CHECK(package_arch("deb", "ppc64le").empty());
  CHECK(package_arch("apk", "x86_64").empty());
}

TEST_CASE(
    "a .deb whose control.tar expands without end is refused at 64 MiB, and "
    "an interrupt stops the decompression",
    "[toolkit-packages]") {
  // The cap counts every entry, so a pad after ./control is refused as one
  // before it is (dpkg unpacks all of control.tar on the node).
  const auto pad = GENERATE(gpunode::test::BombPad::kBeforeControl,
                            gpunode::test::BombPad::kAfterControl);
  INFO("pad " << (pad == gpunode::test::BombPad::kAfterControl ? "after"
                                                               : "before")
              << " ./control");
  TempDir tmp;
  const std::string bomb = tmp.path() + "/bomb.deb";
  gpunode::test::write_deb_bomb(
      bomb,
      "Package: nvidia-container-toolkit\nVersion: 1.17.8-1\n"
      "Architecture: amd64\nMaintainer: NVIDIA\nDescription: x\n",
      std::int64_t{1} << 30, pad);
  auto refused = read_package_info(bomb);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().exit == ExitCode::kUsage);
  CHECK_THAT(refused.error().message,
             Catch::Contains(bomb) &&
                 Catch::Contains("control.tar.zst expands to more than 64 "
                                 "MiB"));

  // Below the cap, an interrupt that arrived stops it all the same.
  gpunode::test::write_deb_bomb(
      bomb,
      "Package: nvidia-container-toolkit\nVersion: 1.17.8-1\n"
      "Architecture: amd64\nMaintainer: NVIDIA\nDescription: x\n",
      std::int64_t{32} << 20, pad);
  REQUIRE(read_package_info(bomb));  // it reads when left alone
  install_interrupt_handlers();
  ::raise(SIGINT);
  auto stopped = read_package_info(bomb);
  reset_interrupt_for_tests();
  REQUIRE_FALSE(stopped);
  CHECK(stopped.error().exit == ExitCode::kInterrupted);
}
