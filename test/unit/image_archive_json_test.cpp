// Image archives whose JSON documents have fields of the wrong type or
// shape (found by test/fuzz/oci_archive_fuzz): each must be refused as a
// malformed or damaged archive, never end in an exception. The archives are
// built in memory and read with the *_bytes readers.
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "gpunode/digest.hpp"
#include "gpunode/image_archive.hpp"
#include "oci_builder.hpp"

namespace gpunode {
namespace {

const std::string kRef = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";

std::string hex_sha256(const std::string& s) { return gpunode::sha256_hex(s); }
using gpunode::test::tar_of;

TEST_CASE("a docker archive config without rootfs is malformed, not a throw",
          "[image]") {
  // The fuzzer's input: "rootfs" misspelt, so the config has none.
  const std::string config =
      R"({"architecture":"amd64","os":"linux","rootbs":{"type":"layers","diff_ids":["sha256:x"]}})";
  const std::string layer = "layer tar";
  const std::string config_name = "blobs/sha256/" + hex_sha256(config);
  const std::string layer_name = "blobs/sha256/" + hex_sha256(layer);
  const std::string manifest = R"([{"Config":")" + config_name +
                               R"(","RepoTags":[")" + kRef +
                               R"("],"Layers":[")" + layer_name + R"("]}])";
  const std::string tar = tar_of({{"manifest.json", manifest},
                                  {config_name, config},
                                  {layer_name, layer}});
  Result<ImageArchiveInfo> r = Error{};
  REQUIRE_NOTHROW(
      r = verify_image_archive_bytes(tar, "image.tar", kRef, "linux/amd64"));
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
  CHECK_THAT(r.error().message,
             Catch::Contains("does not match the config's rootfs.diff_ids"));
}

TEST_CASE("wrong-typed descriptor fields are refused, not thrown", "[image]") {
  const std::string layer = "layer";
  const std::string config =
      R"({"architecture":"amd64","os":"linux","rootfs":{"diff_ids":[]}})";
  struct Case {
    const char* name;
    std::string index;
    ExitCode exit;
  };
  const std::vector<Case> cases = {
      {"digest is a number",
       R"({"manifests":[{"digest":5,"annotations":{"io.containerd.image.name":")" +
           kRef + R"("}}]})",
       ExitCode::kIntegrity},
      {"mediaType is an object",
       R"({"manifests":[{"mediaType":{},"digest":"sha256:00","annotations":{"io.containerd.image.name":")" +
           kRef + R"("}}]})",
       ExitCode::kIntegrity},
      {"platform os is a number",
       R"({"manifests":[{"digest":"sha256:00","platform":{"os":1,"architecture":[]},"annotations":{"io.containerd.image.name":")" +
           kRef + R"("}}]})",
       ExitCode::kUsage},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      const std::string tar =
          tar_of({{"oci-layout", R"({"imageLayoutVersion":"1.0.0"})"},
                  {"index.json", c.index},
                  {"blobs/sha256/" + hex_sha256(config), config},
                  {"blobs/sha256/" + hex_sha256(layer), layer}});
      Result<ImageArchiveInfo> r = Error{};
      REQUIRE_NOTHROW(r = verify_image_archive_bytes(tar, "image.tar", kRef,
                                                     "linux/amd64"));
      REQUIRE_FALSE(r);
      CHECK(r.error().exit == c.exit);
      REQUIRE_NOTHROW(peek_image_archive_bytes(tar, "image.tar", kRef));
    }
  }
}

TEST_CASE("a docker archive whose Config is not a string is refused",
          "[image]") {
  const std::string tar = tar_of(
      {{"manifest.json", R"([{"Config":7,"RepoTags":[")" + kRef + R"("]}])"}});
  Result<ImageArchiveInfo> r = Error{};
  REQUIRE_NOTHROW(r = peek_image_archive_bytes(tar, "image.tar", kRef));
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kIntegrity);
  CHECK_THAT(r.error().message, Catch::Contains("is referenced but missing"));
}

TEST_CASE("an archive in memory reads like the same file", "[image]") {
  const std::string layer = "layer bytes";
  const std::string config =
      R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:)" +
      hex_sha256(layer) + R"("]}})";
  const std::string manifest =
      R"({"schemaVersion":2,"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:)" +
      hex_sha256(config) + R"(","size":)" + std::to_string(config.size()) +
      R"(},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:)" +
      hex_sha256(layer) + R"(","size":)" + std::to_string(layer.size()) + "}]}";
  const std::string index =
      R"({"schemaVersion":2,"manifests":[{"digest":"sha256:)" +
      hex_sha256(manifest) +
      R"(","platform":{"os":"linux","architecture":"amd64"},"annotations":{"org.opencontainers.image.ref.name":"v0.19.3"}}]})";
  const std::string tar =
      tar_of({{"index.json", index},
              {"blobs/sha256/" + hex_sha256(manifest), manifest},
              {"blobs/sha256/" + hex_sha256(config), config},
              {"blobs/sha256/" + hex_sha256(layer), layer}});
  auto r = verify_image_archive_bytes(tar, "image.tar", kRef, "linux/amd64");
  REQUIRE(r);
  CHECK(r->target_digest == "sha256:" + hex_sha256(manifest));
  CHECK(r->name_in_archive == "v0.19.3");
  CHECK(r->platforms == std::vector<std::string>{"linux/amd64"});
  CHECK(r->entries == 4);
}

TEST_CASE(
    "peeking a docker archive whose config is not named after its digest "
    "gives the config's digest, as verifying does",
    "[image][records]") {
  // bundle create records the verified digest; bundle verify peeks: both
  // must say the same, or a good bundle would be refused.
  const std::string layer = "layer tar";
  const std::string config =
      R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:)" +
      hex_sha256(layer) + R"("]}})";
  const std::string manifest = R"([{"Config":"config.json","RepoTags":[")" +
                               kRef + R"("],"Layers":["layer.tar"]}])";
  const std::string tar = tar_of({{"config.json", config},
                                  {"layer.tar", layer},
                                  {"manifest.json", manifest}});
  auto verified =
      verify_image_archive_bytes(tar, "image.tar", kRef, "linux/amd64");
  REQUIRE(verified);
  CHECK(verified->target_digest == "sha256:" + hex_sha256(config));
  auto peeked = peek_image_archive_bytes(tar, "image.tar", kRef);
  REQUIRE(peeked);
  CHECK(peeked->target_digest == verified->target_digest);
}

}  // namespace
}  // namespace gpunode
