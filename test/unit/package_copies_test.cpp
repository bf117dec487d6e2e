// The toolkit packages' private copies (stages/package_copies.hpp): the
// package manager reads only bytes that match bundle.toml, whatever the
// stick serves after the bundle was verified.
#include "stages/package_copies.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "gpunode/digest.hpp"
#include "test_support.hpp"

using gpunode::ExitCode;
using gpunode::PackageCopies;
using gpunode::PackageToCopy;
using gpunode::test::TempDir;
namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The state dir's entries, by name.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  return names;
}

struct Stick {
  TempDir t;
  std::string stick = t.path() + "/stick";
  std::string state = t.path() + "/state";
  Stick() {
    fs::create_directories(stick + "/packages/rpm");
    fs::create_directories(state);
  }
  PackageToCopy package(const std::string& file, const std::string& bytes) {
    write(stick + "/" + file, bytes);
    return {stick + "/" + file, file, gpunode::sha256_hex(bytes)};
  }
};

}  // namespace

TEST_CASE("package copies: byte-identical private copies, gone afterwards",
          "[packages]") {
  Stick s;
  const std::string big(3 << 20, 'x');  // more than one read
  const std::vector<PackageToCopy> wanted = {
      s.package("packages/rpm/a.rpm", big),
      s.package("packages/rpm/b.rpm", "small")};
  std::string dir;
  {
    auto copies = PackageCopies::make(s.state, wanted);
    REQUIRE(copies);
    REQUIRE(copies->paths().size() == 2);
    CHECK(read(copies->paths()[0]) == big);
    CHECK(read(copies->paths()[1]) == "small");
    CHECK(fs::path(copies->paths()[0]).filename() == "a.rpm");
    dir = fs::path(copies->paths()[0]).parent_path().string();
    CHECK(fs::path(dir).parent_path() == fs::path(s.state));
    struct stat st {};
    REQUIRE(::stat(dir.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);  // nobody else reads or swaps them
  }
  CHECK_FALSE(fs::exists(dir));
  CHECK(entries(s.state).empty());
}

TEST_CASE(
    "package copies: a file that no longer matches bundle.toml is exit 4, "
    "named, and nothing is left",
    "[packages]") {
  Stick s;
  PackageToCopy good = s.package("packages/rpm/a.rpm", "package a");
  PackageToCopy changed = s.package("packages/rpm/b.rpm", "package b");
  write(changed.source, "package b, changed on the stick");
  auto copies = PackageCopies::make(s.state, {good, changed});
  REQUIRE_FALSE(copies);
  CHECK(copies.error().exit == ExitCode::kIntegrity);
  CHECK(copies.error().layer == "toolkit");
  CHECK_THAT(copies.error().message,
             Catch::Contains("packages/rpm/b.rpm on the stick no longer "
                             "matches bundle.toml") &&
                 Catch::Contains(changed.sha256) &&
                 Catch::Contains("nothing was installed"));
  CHECK(entries(s.state).empty());
}

TEST_CASE("package copies: a symbolic link on the stick is not followed",
          "[packages]") {
  Stick s;
  write(s.t.path() + "/elsewhere.rpm", "package a");
  fs::create_symlink(s.t.path() + "/elsewhere.rpm",
                     s.stick + "/packages/rpm/a.rpm");
  PackageToCopy link{s.stick + "/packages/rpm/a.rpm", "packages/rpm/a.rpm",
                     gpunode::sha256_hex("package a")};
  auto copies = PackageCopies::make(s.state, {link});
  REQUIRE_FALSE(copies);
  CHECK(copies.error().exit == ExitCode::kBlocked);
  CHECK_THAT(copies.error().message,
             Catch::Contains("cannot copy the bundle's packages/rpm/a.rpm"));
  CHECK(entries(s.state).empty());
}

TEST_CASE(
    "package copies: what an interrupted run left in the state dir is "
    "removed, nothing else",
    "[packages]") {
  Stick s;
  fs::create_directories(s.state + "/toolkit-packages.AbC123/x");
  write(s.state + "/toolkit-packages.AbC123/x/a.rpm", "old");
  write(s.state + "/journal.json", "{}");
  auto copies =
      PackageCopies::make(s.state, {s.package("packages/rpm/a.rpm", "a")});
  REQUIRE(copies);
  CHECK_FALSE(fs::exists(s.state + "/toolkit-packages.AbC123"));
  CHECK(fs::exists(s.state + "/journal.json"));
}
