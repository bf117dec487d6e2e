// The set check of `bundle create --toolkit-packages DIR`: each failure
// class is kUsage naming the problem and the files; a directory's links and
// non-regular files are refused, other files skipped with a note.
#include "gpunode/toolkit_package_set.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "test_support.hpp"
#include "toolkit_package_files.hpp"

using namespace gpunode;
using namespace gpunode::bundle;
using gpunode::test::make_toolkit_packages;
using gpunode::test::TempDir;
using gpunode::test::write_text;

namespace {

std::vector<ToolkitPackageFile> full_set(const std::string& family = "deb",
                                         const std::string& arch = "amd64",
                                         const std::string& version = "1.0-1") {
  std::vector<ToolkitPackageFile> files;
  for (std::string_view name : kToolkitPackageNames) {
    files.push_back({"d/" + std::string(name) + "." + family,
                     {family, std::string(name), version, arch}});
  }
  return files;
}

std::string refused(std::vector<ToolkitPackageFile> files) {
  auto r = check_toolkit_package_set("d", std::move(files));
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
  return r.error().message;
}

}  // namespace

TEST_CASE("a complete set passes, in kToolkitPackageNames order",
          "[toolkit-packages]") {
  auto files = full_set("rpm", "aarch64");
  std::reverse(files.begin(), files.end());
  auto set = check_toolkit_package_set("d", files);
  REQUIRE(set);
  CHECK(set->family == "rpm");
  CHECK(set->arch == "aarch64");
  CHECK(set->version == "1.0-1");
  REQUIRE(set->files.size() == 4);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(set->files[i].info.name == kToolkitPackageNames[i]);
}

TEST_CASE("each way a set can be wrong is named with its files",
          "[toolkit-packages]") {
  auto missing = full_set();
  missing.pop_back();
  CHECK_THAT(refused(missing),
             Catch::Contains("it lacks libnvidia-container1"));

  auto extra = full_set();
  extra.push_back({"d/curl.deb", {"deb", "curl", "1.0-1", "amd64"}});
  CHECK_THAT(refused(extra),
             Catch::Contains("curl (d/curl.deb) is not one of the toolkit's"));

  auto twice = full_set();
  twice.push_back(twice[0]);
  twice.back().path = "d/copy.deb";
  CHECK_THAT(refused(twice),
             Catch::Contains("nvidia-container-toolkit is there 2 times: "
                             "d/copy.deb, d/nvidia-container-toolkit.deb"));

  auto versions = full_set();
  versions[1].info.version = "1.1-1";
  CHECK_THAT(
      refused(versions),
      Catch::Contains("it mixes versions: ") &&
          Catch::Contains("d/nvidia-container-toolkit-base.deb (1.1-1)"));

  auto arches = full_set();
  arches[2].info.arch = "arm64";
  CHECK_THAT(refused(arches),
             Catch::Contains("it mixes architectures: ") &&
                 Catch::Contains("d/libnvidia-container-tools.deb (arm64)"));

  auto families = full_set();
  families[3] = full_set("rpm", "x86_64")[3];
  const std::string mixed = refused(families);
  CHECK_THAT(mixed, Catch::Contains("it mixes families: ") &&
                        Catch::Contains("d/libnvidia-container1.rpm (rpm)") &&
                        // Every problem at once, not only the first.
                        Catch::Contains("it mixes architectures"));

  CHECK_THAT(refused(full_set("deb", "i386")),
             Catch::Contains("no toolkit for architecture i386 (amd64 and "
                             "arm64 only)"));
  CHECK_THAT(refused({}), Catch::Contains("holds no .deb or .rpm file"));
}

TEST_CASE("bundle file names come from the metadata, the epoch dropped",
          "[toolkit-packages]") {
  CHECK(package_bundle_file(
            {"deb", "libnvidia-container1", "1:1.17.8-1", "amd64"}) ==
        "packages/deb/libnvidia-container1_1.17.8-1_amd64.deb");
  CHECK(package_bundle_file(
            {"rpm", "nvidia-container-toolkit", "1.17.8-1", "aarch64"}) ==
        "packages/rpm/nvidia-container-toolkit-1.17.8-1.aarch64.rpm");
}

TEST_CASE("a package directory: links and non-files refused, others noted",
          "[toolkit-packages]") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/deb";
  const auto files = make_toolkit_packages(dir);
  write_text(dir + "/README", "not a package\n");
  std::vector<std::string> notes;
  auto note = [&](const std::string& s) { notes.push_back(s); };
  auto set = read_toolkit_package_dir(dir, note);
  REQUIRE(set);
  CHECK(set->files.size() == 4);
  REQUIRE(notes.size() == 1);
  CHECK_THAT(notes[0], Catch::Contains("ignoring " + dir + "/README"));

  // Two directories of one family and architecture.
  const std::string again = tmp.path() + "/again";
  make_toolkit_packages(again);
  auto both = read_toolkit_package_dirs({dir, again}, note);
  REQUIRE_FALSE(both);
  CHECK(both.error().exit == ExitCode::kUsage);
  CHECK_THAT(both.error().message,
             Catch::Contains("holds the deb amd64 set that " + dir));
  // One per family and architecture is fine.
  const std::string rpm = tmp.path() + "/rpm";
  make_toolkit_packages(rpm, "rpm");
  auto two = read_toolkit_package_dirs({dir, rpm}, note);
  REQUIRE(two);
  CHECK(two->size() == 2);

  REQUIRE(::symlink(files[0].c_str(), (dir + "/link.deb").c_str()) == 0);
  std::filesystem::create_directory(dir + "/sub.rpm");
  auto bad = read_toolkit_package_dir(dir, note);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().exit == ExitCode::kUsage);
  CHECK_THAT(bad.error().message,
             Catch::Contains(dir + "/link.deb is a symbolic link") &&
                 Catch::Contains(dir + "/sub.rpm is not a regular file"));

  auto none = read_toolkit_package_dir(tmp.path() + "/absent", note);
  REQUIRE_FALSE(none);
  CHECK(none.error().exit == ExitCode::kUsage);
}

TEST_CASE(
    "a package directory's files are told apart by content, never by name",
    "[toolkit-packages]") {
  TempDir tmp;
  for (const std::string family : {"deb", "rpm"}) {
    INFO(family);
    const std::string dir = tmp.path() + "/" + family;
    const auto files = make_toolkit_packages(dir, family);
    // A package saved under another name is taken, by its content.
    const std::string renamed = dir + "/notes.txt";
    std::filesystem::rename(files[0], renamed);
    // An ar archive that is no .deb (a static library) is not a package.
    write_text(dir + "/libx.a",
               "!<arch>\nx.o/           0           0     0 "
               "    644     0         `\n");
    std::vector<std::string> notes;
    auto note = [&](const std::string& s) { notes.push_back(s); };
    auto set = read_toolkit_package_dir(dir, note);
    REQUIRE(set);
    CHECK(set->family == family);
    REQUIRE(set->files.size() == 4);
    CHECK(std::count_if(set->files.begin(), set->files.end(),
                        [&](auto& f) { return f.path == renamed; }) == 1);
    CHECK(set->ignored == std::vector<std::string>{"libx.a"});
    REQUIRE(notes.size() == 1);
    CHECK_THAT(notes[0], Catch::Contains(dir + "/libx.a"));

    // Named as a package but none: an error naming it, as before.
    write_text(dir + "/x." + family, "not a package\n");
    auto bad = read_toolkit_package_dir(dir, note);
    REQUIRE_FALSE(bad);
    CHECK(bad.error().exit == ExitCode::kUsage);
    CHECK_THAT(bad.error().message,
               Catch::Contains(dir + "/x." + family +
                               ": it is neither a .deb nor an .rpm"));
  }
}

TEST_CASE(
    "a package directory with the vendor's other files: one note for all, "
    "the whole list kept",
    "[toolkit-packages]") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/deb";
  make_toolkit_packages(dir);
  const std::vector<std::string> others{"LICENSE", "NOTICE", "README",
                                        "SHA256SUMS", "SHA256SUMS.asc"};
  for (const auto& name : others) write_text(dir + "/" + name, "vendor\n");
  std::vector<std::string> notes;
  auto set = read_toolkit_package_dir(
      dir, [&](const std::string& s) { notes.push_back(s); });
  REQUIRE(set);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] == "ignoring 5 other files in " + dir +
                        " (not .deb or .rpm): LICENSE, NOTICE, README and 2 "
                        "more");
  CHECK(set->ignored == others);
  CHECK(ignored_files_note("/d", {"a", "b"}) ==
        "ignoring 2 other files in /d (not .deb or .rpm): a and b");
  CHECK(ignored_files_note("/d", {"a", "b", "c"}) ==
        "ignoring 3 other files in /d (not .deb or .rpm): a, b and c");
}

TEST_CASE("a package that changed between the check and the copy is refused",
          "[toolkit-packages]") {
  TempDir tmp;
  const auto files = make_toolkit_packages(tmp.path() + "/deb");
  auto info = read_package_info(files[0]);
  REQUIRE(info);
  ToolkitPackageFile checked{files[0], *info};
  CHECK(confirm_copied_package(files[0], checked));
  // What was checked said another version than the copy says now.
  checked.info.version = "1.17.7-1";
  auto changed = confirm_copied_package(files[0], checked);
  REQUIRE_FALSE(changed);
  CHECK(changed.error().exit == ExitCode::kUsage);
  CHECK_THAT(changed.error().message,
             Catch::Contains("changed while the bundle was made (it was "
                             "libnvidia-container-tools 1.17.7-1 amd64, its "
                             "copy is libnvidia-container-tools 1.17.8-1 "
                             "amd64)"));
}
