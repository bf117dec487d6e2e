// Pulls from a real registry (Debian's docker-registry on loopback, filled
// by the real skopeo): the archive written passes the image stage's check
// and a real `ctr images import`; `bundle create --pull` makes a bundle
// `bundle verify` accepts; damaged content in the registry is refused
// (exit 4) with nothing written; an unknown tag is a clear exit 1.
#include "gpunode/registry_pull.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "containerd_fixture.hpp"
#include "gpunode/image_archive.hpp"
#include "oci_builder.hpp"
#include "registry_fixture.hpp"
#include "test_support.hpp"

using gpunode::ExitCode;
using gpunode::test::build_image;
using gpunode::test::BuiltImage;
using gpunode::test::Containerd;
using gpunode::test::ImageSpec;
using gpunode::test::Registry;
using gpunode::test::Run;
using gpunode::test::run_gpunode;
using gpunode::test::TempDir;

using gpunode::test::flip_byte;

namespace {

constexpr const char* kLocked = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";
constexpr const char* kRepoTag = "nvidia/k8s-device-plugin:v0.19.3";

#define REQUIRE_REGISTRY()                                             \
  if (!gpunode::test::registry_available()) {                          \
    FAIL(                                                              \
        "the registry tests need Debian's docker-registry and skopeo " \
        "(scripts/setup.sh)");                                         \
  }

// The two-platform test image, pushed as the registry's copy of the locked
// device-plugin image.
BuiltImage push_test_image(const TempDir& tmp, Registry& registry,
                           std::size_t layer_bytes = 64 * 1024) {
  ImageSpec spec;
  spec.layer_bytes = layer_bytes;
  BuiltImage built = build_image(tmp.path() + "/src.tar", spec);
  registry.push(built.path, kRepoTag);
  return built;
}

}  // namespace

TEST_CASE("a pulled image passes the image check and imports with real ctr",
          "[e2e][registry]") {
  REQUIRE_REGISTRY();
  TempDir tmp;
  Registry registry;
  const BuiltImage built = push_test_image(tmp, registry);

  gpunode::bundle::PullOptions pull;
  pull.ref = registry.host() + "/" + kRepoTag;
  pull.out_path = tmp.path() + "/pulled.tar";
  pull.insecure_http = true;
  pull.name_as = gpunode::bundle::archive_name_for(pull.ref);
  CHECK(pull.name_as == kLocked);
  auto digest = gpunode::bundle::pull_to_oci_archive(pull);
  INFO((digest ? "" : digest.error().message));
  REQUIRE(digest);
  // The fixture pushes with --preserve-digests, so the registry serves the
  // index build_image wrote, and the archive keeps it byte for byte.
  CHECK(digest->digest == built.index_digest);

  for (const char* platform : {"linux/amd64", "linux/arm64"}) {
    auto info = gpunode::verify_image_archive(pull.out_path, kLocked, platform);
    INFO(platform << ": " << (info ? "" : info.error().message));
    REQUIRE(info);
    CHECK(info->target_digest == digest->digest);
  }
  // Nothing but the tar is left next to it.
  std::size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 2);  // src.tar, pulled.tar

  // Only one platform asked for: the other's blobs are left out, and the
  // archive is still good for the one pulled.
  pull.platforms = {"linux/amd64"};
  pull.out_path = tmp.path() + "/amd64.tar";
  REQUIRE(gpunode::bundle::pull_to_oci_archive(pull));
  CHECK(gpunode::verify_image_archive(pull.out_path, kLocked, "linux/amd64"));
  CHECK(std::filesystem::file_size(pull.out_path) <
        std::filesystem::file_size(tmp.path() + "/pulled.tar"));

  if (!gpunode::test::containerd_available())
    FAIL("needs root and Debian's containerd (scripts/setup.sh)");
  Containerd& ctd = Containerd::shared();
  ctd.reset();
  auto r =
      ctd.ctr({"images", "import", "--base-name",
               "nvcr.io/nvidia/k8s-device-plugin", tmp.path() + "/pulled.tar"});
  INFO(r.out << r.err);
  REQUIRE(r.succeeded());
  auto ls = ctd.ctr({"images", "ls", "name==" + std::string(kLocked)});
  CHECK_THAT(ls.out, Catch::Contains(digest->digest));
  ctd.reset();
}

TEST_CASE("bundle create --pull makes a bundle that bundle verify accepts",
          "[e2e][registry]") {
  REQUIRE_REGISTRY();
  TempDir tmp;
  Registry registry;
  push_test_image(tmp, registry, 8 * 1024 * 1024);
  const std::string out = tmp.path() + "/bundle";
  const auto start = std::chrono::steady_clock::now();
  Run c = run_gpunode({"bundle", "create", "--out", out, "--pull",
                       registry.host() + "/" + kRepoTag, "--insecure-registry",
                       "--platform", "linux/amd64,linux/arm64", "--created",
                       "2026-11-29T10:00:00Z"});
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  WARN("bundle create --pull (2 platforms, 2 x 8 MiB layers): " << secs
                                                                << " s");
  CHECK_THAT(c.err, Catch::Contains("pulled " + registry.host()));
  // The pull's progress: its blobs streamed, counted to the end.
  CHECK_THAT(c.err, Catch::Contains("[pull] " + registry.host() + "/" +
                                    kRepoTag + ": done, "));
  Run v = run_gpunode({"bundle", "verify", out, "--insecure-skip-signature"});
  INFO(v.err);
  CHECK(v.exit_code == 0);
  CHECK(std::filesystem::exists(out + "/images/k8s-device-plugin-v0.19.3.tar"));
  // No temporary file or partial bundle is left next to --out.
  std::size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 2);  // src.tar, bundle
}

TEST_CASE("a blob damaged in the registry is refused, nothing written",
          "[e2e][registry]") {
  REQUIRE_REGISTRY();
  TempDir tmp;
  Registry registry;
  const BuiltImage built = push_test_image(tmp, registry);
  const std::string layer = built.layer_digests.at("linux/amd64");
  flip_byte(registry.blob_path(layer), 100);

  const std::string out = tmp.path() + "/bundle";
  Run c =
      run_gpunode({"bundle", "create", "--out", out, "--pull",
                   registry.host() + "/" + kRepoTag, "--insecure-registry"});
  INFO(c.err);
  CHECK(c.exit_code == 4);
  CHECK_THAT(c.err, Catch::Contains(layer));
  CHECK_FALSE(std::filesystem::exists(out));
  std::size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path())) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);  // src.tar only: no partial pull, no partial bundle

  // The library names the blob and leaves no tar either.
  gpunode::bundle::PullOptions pull;
  pull.ref = registry.host() + "/" + kRepoTag;
  pull.out_path = tmp.path() + "/pulled.tar";
  pull.insecure_http = true;
  auto r = gpunode::bundle::pull_to_oci_archive(pull);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kIntegrity);
  CHECK_FALSE(std::filesystem::exists(pull.out_path));
}

TEST_CASE(
    "a locked image missing from the registry is exit 1 and an image gpunode "
    "does not install is exit 2 before any download",
    "[e2e][registry]") {
  REQUIRE_REGISTRY();
  TempDir tmp;
  Registry registry;
  push_test_image(tmp, registry);
  const std::string out = tmp.path() + "/bundle";
  // The locked image from a registry that does not hold it.
  Registry empty;
  Run c = run_gpunode({"bundle", "create", "--out", out, "--pull",
                       empty.host() + "/" + kRepoTag, "--insecure-registry"});
  INFO(c.err);
  CHECK(c.exit_code == 1);
  CHECK_THAT(c.err, Catch::Contains("HTTP 404"));
  CHECK_FALSE(std::filesystem::exists(out));

  // A tag the bundle would not install is refused before any request.
  Run other = run_gpunode({"bundle", "create", "--out", out, "--pull",
                           registry.host() + "/nvidia/k8s-device-plugin:v9.9.9",
                           "--insecure-registry"});
  INFO(other.err);
  CHECK(other.exit_code == 2);
  CHECK_THAT(other.err, Catch::Contains("is neither"));
  CHECK_FALSE(std::filesystem::exists(out));

  // A malformed ref is a usage error, found before any network use.
  Run bad = run_gpunode({"bundle", "create", "--out", out, "--pull",
                         "127.0.0.1:1/Not A Ref", "--insecure-registry"});
  CHECK(bad.exit_code == 2);

  // Without --insecure-registry a plain-HTTP registry fails TLS: exit 1.
  Run tls = run_gpunode({"bundle", "create", "--out", out, "--pull",
                         registry.host() + "/" + kRepoTag});
  INFO(tls.err);
  CHECK(tls.exit_code == 1);
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("an HTTPS registry is trusted through --registry-ca, never blindly",
          "[e2e][registry]") {
  REQUIRE_REGISTRY();
  TempDir tmp;
  Registry registry(/*tls=*/true);
  const BuiltImage built = push_test_image(tmp, registry);
  const std::string ref = registry.host() + "/" + kRepoTag;

  // Its CA is not a system CA: refused (exit 1), with the fix named.
  const std::string out = tmp.path() + "/bundle";
  Run untrusted =
      run_gpunode({"bundle", "create", "--out", out, "--pull", ref});
  INFO(untrusted.err);
  CHECK(untrusted.exit_code == 1);
  CHECK_THAT(untrusted.err, Catch::Contains("--registry-ca"));
  CHECK_FALSE(std::filesystem::exists(out));

  Run trusted = run_gpunode({"bundle", "create", "--out", out, "--pull", ref,
                             "--registry-ca", registry.ca_file(), "--created",
                             "2026-11-29T10:00:00Z"});
  INFO(trusted.err);
  REQUIRE(trusted.exit_code == 0);
  CHECK_THAT(trusted.err, Catch::Contains(built.index_digest));
  Run v = run_gpunode({"bundle", "verify", out, "--insecure-skip-signature"});
  INFO(v.err);
  CHECK(v.exit_code == 0);
}
