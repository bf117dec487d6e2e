// `bundle create --toolkit-packages DIR` through the real binary: a deb and
// an rpm set land in packages/<family>/, bundle.toml lists them with the
// sha256 that sha256sum prints, verify reports them; a bad set is exit 2
// and leaves nothing at --out.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpunode/bundle.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"
#include "toolkit_package_files.hpp"

using gpunode::test::BombPad;
using gpunode::test::build_image;
using gpunode::test::ImageSpec;
using gpunode::test::make_toolkit_packages;
using gpunode::test::read_text;
using gpunode::test::Run;
using gpunode::test::run_gpunode;
using gpunode::test::run_with_sim;
using gpunode::test::snapshot_tree;
using gpunode::test::TempDir;
using gpunode::test::write_deb_bomb;

namespace fs = std::filesystem;

namespace {

std::vector<std::string> create_args(const TempDir& tmp,
                                     const std::vector<std::string>& dirs) {
  std::vector<std::string> args = {
      "bundle",          "create",
      "--out",           tmp.path() + "/bundle",
      "--image-archive", tmp.path() + "/plugin.tar",
      "--created",       "2026-11-29T10:00:00Z"};
  for (const auto& d : dirs) {
    args.push_back("--toolkit-packages");
    args.push_back(d);
  }
  return args;
}

std::string sha256sum(const std::string& path) {
  Run r = run_with_sim({"sha256sum", path});
  REQUIRE(r.exit_code == 0);
  return r.out.substr(0, 64);
}

}  // namespace

TEST_CASE("bundle create --toolkit-packages carries a deb and an rpm set",
          "[e2e][bundle][toolkit-packages]") {
  TempDir tmp;
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  make_toolkit_packages(tmp.path() + "/deb", "deb", "1.17.8-1", "amd64");
  make_toolkit_packages(tmp.path() + "/rpm", "rpm", "1.17.8-1", "arm64");
  Run c =
      run_gpunode(create_args(tmp, {tmp.path() + "/deb", tmp.path() + "/rpm"}));
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  CHECK_THAT(c.err, Catch::Contains("8 toolkit packages (deb amd64 1.17.8-1, "
                                    "rpm aarch64 1.17.8-1)"));
  const std::string bundle = tmp.path() + "/bundle";

  auto m = gpunode::bundle::parse_manifest(read_text(bundle + "/bundle.toml"),
                                           "bundle.toml");
  REQUIRE(m);
  REQUIRE(m->packages.size() == 8);
  for (const auto& p : m->packages) {
    INFO(p.file);
    CHECK(p.version == "1.17.8-1");
    CHECK(p.sha256 == sha256sum(bundle + "/" + p.file));
  }
  CHECK(m->packages[0].family == "deb");
  CHECK(m->packages[0].arch == "amd64");
  CHECK(m->packages[0].file ==
        "packages/deb/libnvidia-container-tools_1.17.8-1_amd64.deb");
  CHECK(m->packages[4].file ==
        "packages/rpm/libnvidia-container-tools-1.17.8-1.aarch64.rpm");
  // The copies are the files given, byte for byte.
  CHECK(read_text(bundle + "/" + m->packages[4].file) ==
        read_text(tmp.path() +
                  "/rpm/libnvidia-container-tools-1.17.8-1.aarch64.rpm"));

  Run v = run_gpunode(
      {"bundle", "verify", bundle, "--insecure-skip-signature", "--json"});
  INFO(v.err);
  REQUIRE(v.exit_code == 0);
  CHECK_THAT(v.err, Catch::Contains("8 toolkit packages (deb amd64 1.17.8-1, "
                                    "rpm aarch64 1.17.8-1)"));
  const auto j = nlohmann::json::parse(gpunode::test::last_line(v.out));
  REQUIRE(j["packages"].size() == 8);
  CHECK(
      j["packages"][0] ==
      nlohmann::json{
          {"family", "deb"},
          {"arch", "amd64"},
          {"name", "libnvidia-container-tools"},
          {"version", "1.17.8-1"},
          {"file", "packages/deb/libnvidia-container-tools_1.17.8-1_amd64.deb"},
          {"sha256", m->packages[0].sha256}});

  // A damaged package is an integrity failure like any file.
  gpunode::test::flip_byte(bundle + "/" + m->packages[0].file, 100);
  CHECK(run_gpunode({"bundle", "verify", bundle, "--insecure-skip-signature"})
            .exit_code == 4);
}

TEST_CASE("a bad toolkit package set is exit 2 and leaves no bundle",
          "[e2e][bundle][toolkit-packages]") {
  TempDir tmp;
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  const std::string dir = tmp.path() + "/deb";
  const auto files = make_toolkit_packages(dir);
  fs::remove(files[0]);
  const auto before = snapshot_tree(tmp.path());
  Run c = run_gpunode(create_args(tmp, {dir}));
  CHECK(c.exit_code == 2);
  CHECK_THAT(c.err, Catch::Contains("it lacks libnvidia-container-tools"));
  // Nothing at --out, and no partial directory beside it.
  CHECK(snapshot_tree(tmp.path()) == before);

  // An --out that is an empty directory stays empty.
  fs::create_directory(tmp.path() + "/bundle");
  const auto rpms = make_toolkit_packages(tmp.path() + "/rpm", "rpm");
  fs::copy_file(rpms[0], dir + "/libnvidia-container-tools.rpm");
  Run mixed = run_gpunode(create_args(tmp, {dir}));
  CHECK(mixed.exit_code == 2);
  CHECK_THAT(mixed.err, Catch::Contains("it mixes families"));
  CHECK(fs::is_empty(tmp.path() + "/bundle"));

  // Not a package, whatever its name says.
  gpunode::test::write_text(files[0], "plain text\n");
  const auto again = snapshot_tree(tmp.path());
  Run text = run_gpunode(create_args(tmp, {dir}));
  CHECK(text.exit_code == 2);
  CHECK_THAT(text.err, Catch::Contains("neither a .deb nor an .rpm"));
  CHECK(snapshot_tree(tmp.path()) == again);
}

TEST_CASE("bundle create --help says what --toolkit-packages takes",
          "[e2e][bundle][toolkit-packages]") {
  Run h = run_gpunode({"bundle", "create", "--help"});
  CHECK(h.exit_code == 0);
  CHECK_THAT(h.out, Catch::Contains("--toolkit-packages") &&
                        Catch::Contains("libnvidia-container1"));
}

TEST_CASE(
    "a .deb whose control.tar expands past 64 MiB is exit 2 naming the file, "
    "in about a second",
    "[e2e][bundle][toolkit-packages]") {
  // Every entry counts, in any order: control first and the pad after it
  // is refused as the pad first is.
  const auto pad = GENERATE(BombPad::kBeforeControl, BombPad::kAfterControl);
  INFO("pad " << (pad == BombPad::kAfterControl ? "after" : "before")
              << " ./control");
  TempDir tmp;
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  const std::string dir = tmp.path() + "/deb";
  const auto files = make_toolkit_packages(dir);
  // In place of nvidia-container-toolkit's: the same control, 1 GiB of
  // zeros with it (about 40 KiB on disk).
  const std::string bomb = dir + "/nvidia-container-toolkit_1.17.8-1_amd64.deb";
  write_deb_bomb(bomb,
                 "Package: nvidia-container-toolkit\nVersion: 1.17.8-1\n"
                 "Architecture: amd64\nMaintainer: NVIDIA\nDescription: x\n",
                 std::int64_t{1} << 30, pad);
  CHECK(fs::file_size(bomb) < 1u << 20);
  const auto before = snapshot_tree(tmp.path());
  const auto t0 = std::chrono::steady_clock::now();
  Run c = run_gpunode(create_args(tmp, {dir}));
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO(c.err);
  CHECK(c.exit_code == 2);
  CHECK_THAT(c.err, Catch::Contains(bomb) &&
                        Catch::Contains("control.tar.zst expands to more "
                                        "than 64 MiB"));
  // Decompressing all of it takes longer; stopping at 64 MiB does not.
  CHECK(took < std::chrono::seconds(3));
  CHECK(snapshot_tree(tmp.path()) == before);
}

TEST_CASE(
    "bundle create: a package directory's other files are one line on "
    "stderr and the full list in --json",
    "[e2e][bundle][toolkit-packages]") {
  TempDir tmp;
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  const std::string dir = tmp.path() + "/deb";
  make_toolkit_packages(dir);
  std::vector<std::string> others;
  for (int i = 0; i < 12; ++i) {
    others.push_back("NOTES-" + std::to_string(10 + i) + ".txt");
    gpunode::test::write_text(dir + "/" + others.back(), "vendor\n");
  }
  auto args = create_args(tmp, {dir});
  args.push_back("--json");
  Run c = run_gpunode(args);
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  CHECK_THAT(c.err, Catch::Contains("ignoring 12 other files in " + dir +
                                    " (not .deb or .rpm): NOTES-10.txt, "
                                    "NOTES-11.txt, NOTES-12.txt and 9 more"));
  // One line for all of them.
  std::size_t lines = 0;
  for (std::size_t at = c.err.find("ignoring"); at != std::string::npos;
       at = c.err.find("ignoring", at + 1))
    ++lines;
  CHECK(lines == 1);
  const auto j = nlohmann::json::parse(gpunode::test::last_line(c.out));
  CHECK(j["command"] == "bundle create");
  CHECK(j["exit_code"] == 0);
  REQUIRE(j["ignored"].size() == 1);
  CHECK(j["ignored"][0]["dir"] == dir);
  CHECK(j["ignored"][0]["files"] == others);
}
