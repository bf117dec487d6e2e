// bundle.toml's [[packages]]: the round trip, and the refusals of
// parse_manifest (a family other than deb/rpm, a sha256 that differs from
// the file's [[files]] entry, a file not listed, a package listed twice
// for one family and architecture), each kUsage naming the problem.
#include <catch2/catch.hpp>

#include "gpunode/bundle.hpp"
#include "gpunode/digest.hpp"

using namespace gpunode;
using namespace gpunode::bundle;

namespace {

const std::string kDeb = "packages/deb/libnvidia-container1_1.17.8-1_amd64.deb";
const std::string kRpm =
    "packages/rpm/libnvidia-container1-1.17.8-1.x86_64.rpm";

Manifest with_packages() {
  Manifest m;
  m.created = "2026-11-29T10:00:00Z";
  m.gpunode_version = "0.1.0";
  m.chunk_bytes = 1024;
  m.files.push_back({kDeb, 10, sha256_hex("deb"), {sha256_hex("deb")}});
  m.files.push_back({kRpm, 10, sha256_hex("rpm"), {sha256_hex("rpm")}});
  // Deliberately rpm first: write_manifest sorts by family, arch, name.
  m.packages.push_back({"rpm", "libnvidia-container1", "1.17.8-1", "x86_64",
                        kRpm, sha256_hex("rpm")});
  m.packages.push_back({"deb", "libnvidia-container1", "1.17.8-1", "amd64",
                        kDeb, sha256_hex("deb")});
  return m;
}

// The text of with_packages() after `change` edited its deb package.
template <typename Change>
std::string deb_changed(Change change) {
  Manifest m = with_packages();
  change(m.packages[1]);  // packages[1] is the deb one
  return write_manifest(m);
}

}  // namespace

TEST_CASE(
    "bundle.toml packages survive a round trip, sorted by family and arch",
    "[bundle][toolkit-packages]") {
  auto parsed = parse_manifest(write_manifest(with_packages()), "bundle.toml");
  REQUIRE(parsed);
  REQUIRE(parsed->packages.size() == 2);
  const PackageEntry& deb = parsed->packages[0];
  CHECK(deb.family == "deb");
  CHECK(deb.name == "libnvidia-container1");
  CHECK(deb.version == "1.17.8-1");
  CHECK(deb.arch == "amd64");
  CHECK(deb.file == kDeb);
  CHECK(deb.sha256 == sha256_hex("deb"));
  CHECK(parsed->packages[1].family == "rpm");
  CHECK(parsed->packages[1].arch == "x86_64");
  // The text is the same whatever order the packages were given in.
  Manifest reversed = with_packages();
  std::swap(reversed.packages[0], reversed.packages[1]);
  CHECK(write_manifest(reversed) == write_manifest(with_packages()));
}

TEST_CASE("bad bundle.toml packages entries are refused naming the problem",
          "[bundle][toolkit-packages]") {
  struct Case {
    std::string text;
    std::string says;
  };
  std::string extra_key = write_manifest(with_packages());
  extra_key.insert(extra_key.find("arch = \"amd64\"\n"), "extra = 1\n");
  const std::vector<Case> cases = {
      {deb_changed([](PackageEntry& p) { p.family = "apk"; }),
       "package family \"apk\" is neither \"deb\" nor \"rpm\""},
      {deb_changed([](PackageEntry& p) { p.sha256 = sha256_hex("other"); }),
       "gives sha256 " + sha256_hex("other") + ", but [[files]] gives " + kDeb},
      {deb_changed([](PackageEntry& p) { p.file = "packages/deb/x.deb"; }),
       "names file \"packages/deb/x.deb\", which is not listed in [[files]]"},
      // The deb entry made a second rpm x86_64 libnvidia-container1.
      {deb_changed([](PackageEntry& p) {
         p.family = "rpm";
         p.arch = "x86_64";
       }),
       "\"libnvidia-container1\" is listed twice for rpm x86_64"},
      {deb_changed([](PackageEntry& p) { p.version.clear(); }),
       "package \"version\" is empty"},
      {extra_key, "unknown key \"extra\""},
  };
  for (const auto& c : cases) {
    INFO(c.text);
    auto parsed = parse_manifest(c.text, "bundle.toml");
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().exit == ExitCode::kUsage);
    CHECK_THAT(parsed.error().message, Catch::Contains(c.says));
  }
}
