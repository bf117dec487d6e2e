// bundle.toml: round trip, byte-for-byte determinism, and a table of the
// inputs that must be refused, each with its exit code and the words that
// tell the operator what is wrong.
#include <algorithm>
#include <catch2/catch.hpp>

#include "gpunode/bundle.hpp"
#include "gpunode/digest.hpp"

using namespace gpunode;
using namespace gpunode::bundle;

namespace {

Manifest sample() {
  Manifest m;
  m.created = "2026-11-29T10:00:00Z";
  m.gpunode_version = "0.1.0";
  m.min_driver = "550.54";
  m.chunk_bytes = 1024;
  m.images.push_back({"device-plugin",
                      "nvcr.io/nvidia/k8s-device-plugin:v0.19.3",
                      "sha256:" + sha256_hex("index"),
                      {"linux/amd64", "linux/arm64"},
                      "images/device-plugin.tar"});
  // Deliberately unsorted: write_manifest sorts.
  m.files.push_back({"images/device-plugin.tar",
                     2500,
                     sha256_hex("whole"),
                     {sha256_hex("a"), sha256_hex("b"), sha256_hex("c")}});
  m.files.push_back(
      {"bin/gpunode", 10, sha256_hex("bin"), {sha256_hex("bin")}});
  m.files.push_back({"empty", 0, sha256_hex(""), {}});
  return m;
}

// The sample's text with one line replaced (must be present).
std::string with(const std::string& from, const std::string& to) {
  std::string text = write_manifest(sample());
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a manifest survives a round trip through its text", "[bundle]") {
  const Manifest m = sample();
  auto parsed = parse_manifest(write_manifest(m), "bundle.toml");
  REQUIRE(parsed);
  CHECK(parsed->format_version == 1);
  CHECK(parsed->created == m.created);
  CHECK(parsed->gpunode_version == "0.1.0");
  CHECK(parsed->min_driver == "550.54");
  CHECK(parsed->chunk_bytes == 1024);
  REQUIRE(parsed->images.size() == 1);
  CHECK(parsed->images[0].ref == m.images[0].ref);
  CHECK(parsed->images[0].digest == m.images[0].digest);
  CHECK(parsed->images[0].platforms == m.images[0].platforms);
  CHECK(parsed->images[0].file == "images/device-plugin.tar");
  REQUIRE(parsed->files.size() == 3);
  // Sorted by path.
  CHECK(parsed->files[0].path == "bin/gpunode");
  CHECK(parsed->files[1].path == "empty");
  CHECK(parsed->files[2].path == "images/device-plugin.tar");
  CHECK(parsed->files[2].size == 2500);
  CHECK(parsed->files[2].chunks == m.files[0].chunks);
  CHECK(parsed->files[1].chunks.empty());
  // And writing what was read gives the same bytes.
  CHECK(write_manifest(*parsed) == write_manifest(m));
}

TEST_CASE("a manifest's text does not depend on the order files are given",
          "[bundle]") {
  Manifest a = sample();
  Manifest b = sample();
  std::reverse(b.files.begin(), b.files.end());
  CHECK(write_manifest(a) == write_manifest(b));
  CHECK(write_manifest(a) == write_manifest(a));
}

TEST_CASE("odd characters in strings cannot break the document", "[bundle]") {
  Manifest m = sample();
  m.gpunode_version = "0.1\"\n[evil]\\x";
  auto parsed = parse_manifest(write_manifest(m), "bundle.toml");
  REQUIRE(parsed);
  CHECK(parsed->gpunode_version == m.gpunode_version);
}

TEST_CASE("bad manifests are refused with a message naming the problem",
          "[bundle]") {
  const std::string chunk_a = "\"" + sha256_hex("a") + "\",\n";
  struct Case {
    const char* name;
    std::string text;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"unknown version", with("format_version = 1", "format_version = 7"),
       "bundle.toml format version 7 is not supported (supported: 1)"},
      {"path with ..", with("path = \"empty\"", "path = \"images/../../etc\""),
       "contains \"..\""},
      {"absolute path", with("path = \"empty\"", "path = \"/etc/passwd\""),
       "is absolute"},
      {"backslash", with("path = \"empty\"", "path = \"a\\\\b\""), "backslash"},
      {"duplicate path", with("path = \"empty\"", "path = \"bin/gpunode\""),
       "listed twice"},
      {"manifest listed", with("path = \"empty\"", "path = \"bundle.toml\""),
       "names the manifest"},
      {"uppercase hex",
       with("sha256 = \"" + sha256_hex("") + "\"",
            "sha256 = \"" + std::string(64, 'A') + "\""),
       "64 lowercase hex"},
      {"short hex",
       with("sha256 = \"" + sha256_hex("") + "\"", "sha256 = \"abc\""),
       "64 lowercase hex"},
      {"wrong chunk count", with(chunk_a, ""), "need 3"},
      {"unknown key", with("size = 0", "size = 0\nx = 1"), "unknown key"},
      {"malformed TOML", with("chunk_bytes = 1024", "chunk_bytes = = 1024"),
       "bundle.toml:6"},
      {"negative size", with("size = 10", "size = -10"),
       "must not be negative"},
      {"zero chunk size", with("chunk_bytes = 1024", "chunk_bytes = 0"),
       "must be positive"},
      {"image file not listed",
       with("file = \"images/device-plugin.tar\"", "file = \"images/x.tar\""),
       "not listed in [[files]]"},
      {"missing version", with("format_version = 1\n", ""),
       "missing key \"format_version\""},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      auto parsed = parse_manifest(c.text, "bundle.toml");
      REQUIRE_FALSE(parsed);
      CHECK(parsed.error().exit == ExitCode::kUsage);
      CHECK_THAT(parsed.error().message, Catch::Contains(c.fragment));
    }
  }
}

TEST_CASE("an empty file has no chunks, a one-byte file has one", "[bundle]") {
  Manifest m = sample();
  m.files = {{"one", 1, sha256_hex("x"), {}}};
  auto parsed = parse_manifest(write_manifest(m), "bundle.toml");
  REQUIRE_FALSE(parsed);
  CHECK_THAT(parsed.error().message, Catch::Contains("need 1"));
  m.files = {{"none", 0, sha256_hex(""), {sha256_hex("")}}};
  parsed = parse_manifest(write_manifest(m), "bundle.toml");
  REQUIRE_FALSE(parsed);
  CHECK_THAT(parsed.error().message, Catch::Contains("need 0"));
}

TEST_CASE("a huge bundle.toml is refused before parsing", "[bundle]") {
  std::string text = write_manifest(sample());
  text += "# " + std::string(kMaxManifestBytes, 'x') + "\n";
  auto parsed = parse_manifest(text, "bundle.toml");
  REQUIRE_FALSE(parsed);
  CHECK(parsed.error().exit == ExitCode::kUsage);
  CHECK_THAT(parsed.error().message, Catch::Contains("at most"));
}

// parse_manifest reads bundle.toml one [[files]] table at a time (issue 24:
// memory); what the document means and where an error is must not change.
TEST_CASE("bundle.toml read table by table means what the whole document does",
          "[bundle]") {
  const std::string text = write_manifest(sample());
  auto line_of = [&](const std::string& s, std::size_t from = 0) {
    const auto at = text.find(s, from);
    REQUIRE(at != std::string::npos);
    return "bundle.toml:" +
           std::to_string(1 +
                          std::count(text.begin(), text.begin() + at, '\n'));
  };
  SECTION("an error in a later table names its line in the whole document") {
    const std::string where = line_of("size = 0");
    auto parsed = parse_manifest(with("size = 0", "size = -1"), "bundle.toml");
    REQUIRE_FALSE(parsed);
    CHECK_THAT(parsed.error().message,
               Catch::Contains(where + ": \"size\" must not be negative"));
    auto malformed =
        parse_manifest(with("size = 0", "size = = 0"), "bundle.toml");
    REQUIRE_FALSE(malformed);
    CHECK_THAT(malformed.error().message, Catch::StartsWith(where));
  }
  SECTION("a path listed twice is named at its later line") {
    const std::string where = line_of("path = \"empty\"");
    auto parsed = parse_manifest(
        with("path = \"empty\"", "path = \"bin/gpunode\""), "bundle.toml");
    REQUIRE_FALSE(parsed);
    CHECK_THAT(parsed.error().message,
               Catch::Contains(where + ": file path \"bin/gpunode\" is listed "
                                       "twice"));
  }
  SECTION("[[images]] after the [[files]] tables is read as TOML reads it") {
    const auto images = text.find("\n[[images]]");
    const auto files = text.find("\n[[files]]");
    REQUIRE(images < files);
    const std::string moved = text.substr(0, images) + text.substr(files) +
                              text.substr(images, files - images);
    auto parsed = parse_manifest(moved, "bundle.toml");
    REQUIRE(parsed);
    auto whole = parse_manifest(text, "bundle.toml");
    REQUIRE(whole);
    REQUIRE(parsed->images.size() == 1);
    CHECK(parsed->images[0].ref == whole->images[0].ref);
    CHECK(parsed->files.size() == whole->files.size());
  }
  SECTION("a [[files]] line inside a multi-line string is refused, not cut") {
    auto parsed = parse_manifest(with("min_driver = \"550.54\"",
                                      "min_driver = \"\"\"\n[[files]]\n\"\"\""),
                                 "bundle.toml");
    REQUIRE_FALSE(parsed);
    CHECK(parsed.error().exit == ExitCode::kUsage);
  }
}
