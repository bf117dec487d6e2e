// bundle.toml: round trip, byte-for-byte determinism, and a table of the
// inputs that must be refused, each with its exit code and the words that
// tell the operator what is wrong.
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
