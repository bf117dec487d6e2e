// verify_bundle against bundles built by hand here (files, hashes, manifest,
// signature), with a 1 KiB chunk so that multi-chunk files are the norm.
// Given a bundle damaged in one way, we should refuse it with kIntegrity,
// name the damaged file, and leave the directory exactly as it was.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "gpunode/bundle.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/interrupt.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"
#include "toolkit_package_files.hpp"

using namespace gpunode;
using namespace gpunode::bundle;
using gpunode::test::read_text;
using gpunode::test::snapshot_tree;
using gpunode::test::TempDir;
using gpunode::test::write_text;

using gpunode::test::flip_byte;

namespace test = gpunode::test;

namespace {

constexpr std::uint64_t kChunk = 1024;

std::string pattern(std::size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

FileEntry entry(const std::string& path, const std::string& data) {
  FileEntry f{path, data.size(), sha256_hex(data), {}};
  for (std::size_t off = 0; off < data.size(); off += kChunk)
    f.chunks.push_back(sha256_hex(data.substr(off, kChunk)));
  return f;
}

struct Bundle {
  TempDir tmp;
  std::string dir;
  KeyPair key;
  Manifest manifest;
  // The one image [[images]] records: a real OCI archive (verify reads its
  // index.json), beside the stand-ins that only the hashes look at.
  std::string image_file = "images/k8s-device-plugin.tar";
  std::uint64_t image_bytes = 0;

  Bundle() : dir(tmp.path() + "/bundle") {
    std::filesystem::create_directories(dir + "/images");
    std::filesystem::create_directories(dir + "/manifests");
    std::filesystem::create_directories(dir + "/bin");
    manifest.created = "2026-11-29T10:00:00Z";
    manifest.gpunode_version = "0.1.0";
    manifest.chunk_bytes = kChunk;
    add("bin/gpunode", pattern(3000, 1));
    add("images/device-plugin.tar", pattern(4 * kChunk + 17, 2));
    add("images/exact.tar", pattern(2 * kChunk, 3));
    add("manifests/runtimeclass.yml", "kind: RuntimeClass\nhandler: nvidia\n");
    add("install.sh", "#!/bin/sh\n");
    add("empty", "");
    test::ImageSpec spec;
    spec.platforms = {"linux/amd64"};
    spec.layer_bytes = 64;
    const test::BuiltImage image =
        test::build_image(tmp.path() + "/dp.tar", spec);
    const std::string archive = read_text(image.path);
    image_bytes = archive.size();
    add(image_file, archive);
    manifest.images.push_back({"device-plugin", spec.ref_name,
                               image.index_digest, spec.platforms, image_file});
    auto k = generate_keypair();
    REQUIRE(k);
    key = *k;
    seal();
  }

  void add(const std::string& path, const std::string& data) {
    write_text(dir + "/" + path, data);
    manifest.files.push_back(entry(path, data));
  }

  // Writes bundle.toml and signs it.
  void seal() {
    const std::string text = write_manifest(manifest);
    write_text(dir + "/bundle.toml", text);
    auto sig = sign(key.private_pem, text);
    REQUIRE(sig);
    write_text(dir + "/bundle.toml.sig", *sig);
  }

  VerifyOptions trusting() const {
    VerifyOptions o;
    o.trust_keys = {key.public_pem};
    return o;
  }
};

// Verifies, expects refusal with every fragment in the message, and checks
// that the directory did not change.
void expect_refused(const Bundle& b, const VerifyOptions& options,
                    const std::vector<std::string>& fragments) {
  const auto before = snapshot_tree(b.dir);
  auto r = verify_bundle(b.dir, options);
  CHECK(snapshot_tree(b.dir) == before);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kIntegrity);
  for (const auto& f : fragments)
    CHECK_THAT(r.error().message, Catch::Contains(f));
}

}  // namespace

TEST_CASE("a good bundle verifies with one and with four threads", "[bundle]") {
  Bundle b;
  const auto before = snapshot_tree(b.dir);
  for (unsigned threads : {1u, 4u, 0u}) {
    VerifyOptions o = b.trusting();
    o.threads = threads;
    auto r = verify_bundle(b.dir, o);
    REQUIRE(r);
    CHECK(r->signed_by_trusted_key);
    CHECK(r->key_fingerprint == key_fingerprint(b.key.public_pem));
    CHECK(r->manifest.files.size() == 7);
    CHECK(r->bytes_hashed ==
          3000 + 4 * kChunk + 17 + 2 * kChunk + 35 + 10 + b.image_bytes);
  }
  CHECK(snapshot_tree(b.dir) == before);
}

TEST_CASE("a read-only bundle verifies (verify never writes)", "[bundle]") {
  Bundle b;
  for (const auto& e : std::filesystem::recursive_directory_iterator(b.dir))
    ::chmod(e.path().c_str(), e.is_directory() ? 0555 : 0444);
  ::chmod(b.dir.c_str(), 0555);
  auto r = verify_bundle(b.dir, b.trusting());
  // Let TempDir remove it again.
  ::chmod(b.dir.c_str(), 0755);
  for (const auto& e : std::filesystem::recursive_directory_iterator(b.dir))
    ::chmod(e.path().c_str(), e.is_directory() ? 0755 : 0644);
  REQUIRE(r);
}

TEST_CASE("a flipped byte in an image names the file and the chunk's range",
          "[bundle]") {
  Bundle b;
  flip_byte(b.dir + "/images/device-plugin.tar", 2 * kChunk + 5);
  expect_refused(b, b.trusting(),
                 {"images/device-plugin.tar: bytes 2048-3071 do not match "
                  "(chunk 3 of 5)"});
}

TEST_CASE("a flipped byte in the short last chunk names its range",
          "[bundle]") {
  Bundle b;
  flip_byte(b.dir + "/images/device-plugin.tar", 4 * kChunk + 16);
  VerifyOptions o = b.trusting();
  o.threads = 3;
  expect_refused(b, o, {"bytes 4096-4112 do not match (chunk 5 of 5)"});
}

TEST_CASE("a flipped byte in a manifest file is refused", "[bundle]") {
  Bundle b;
  flip_byte(b.dir + "/manifests/runtimeclass.yml", 3);
  expect_refused(b, b.trusting(),
                 {"manifests/runtimeclass.yml: bytes 0-34 do not match"});
}

TEST_CASE("a changed bundle.toml fails the signature", "[bundle]") {
  Bundle b;
  std::string text = read_text(b.dir + "/bundle.toml");
  text.replace(text.find("0.1.0"), 5, "0.1.1");
  write_text(b.dir + "/bundle.toml", text);
  expect_refused(b, b.trusting(),
                 {"signature does not match any trusted key",
                  key_fingerprint(b.key.public_pem)});
}

TEST_CASE("a missing file is named", "[bundle]") {
  Bundle b;
  std::filesystem::remove(b.dir + "/images/exact.tar");
  expect_refused(b, b.trusting(), {"images/exact.tar: is missing"});
}

TEST_CASE("an added file is named", "[bundle]") {
  Bundle b;
  write_text(b.dir + "/images/extra.tar", "surprise");
  expect_refused(b, b.trusting(),
                 {"images/extra.tar: is not listed in bundle.toml"});
}

TEST_CASE("a truncated image is named", "[bundle]") {
  Bundle b;
  std::filesystem::resize_file(b.dir + "/images/device-plugin.tar", 100);
  expect_refused(b, b.trusting(),
                 {"images/device-plugin.tar: is 100 bytes; bundle.toml says "
                  "4113 (truncated)"});
}

TEST_CASE("a symbolic link out of the bundle is refused, not followed",
          "[bundle]") {
  Bundle b;
  std::filesystem::remove(b.dir + "/install.sh");
  std::filesystem::create_symlink("/etc/passwd", b.dir + "/install.sh");
  expect_refused(b, b.trusting(),
                 {"install.sh: is a symbolic link (to /etc/passwd)"});
}

TEST_CASE("a symbolic link bundle.toml is refused", "[bundle]") {
  Bundle b;
  std::filesystem::rename(b.dir + "/bundle.toml", b.tmp.path() + "/real.toml");
  std::filesystem::create_symlink(b.tmp.path() + "/real.toml",
                                  b.dir + "/bundle.toml");
  expect_refused(b, b.trusting(), {"bundle.toml: is a symbolic link"});
}

TEST_CASE("every problem is reported, one per line", "[bundle]") {
  Bundle b;
  std::filesystem::remove(b.dir + "/images/exact.tar");
  write_text(b.dir + "/extra", "x");
  flip_byte(b.dir + "/bin/gpunode", 0);
  flip_byte(b.dir + "/bin/gpunode", 2999);
  expect_refused(
      b, b.trusting(),
      {"extra: is not listed in bundle.toml\n", "images/exact.tar: is missing",
       "bin/gpunode: bytes 0-1023 do not match (chunk 1 of 3)",
       "bin/gpunode: bytes 2048-2999 do not match (chunk 3 of 3)"});
}

TEST_CASE("a signature by another key is refused", "[bundle]") {
  Bundle b;
  auto other = generate_keypair();
  REQUIRE(other);
  VerifyOptions o;
  o.trust_keys = {other->public_pem};
  expect_refused(b, o,
                 {"signature does not match any trusted key",
                  key_fingerprint(other->public_pem)});
  // The independent try: the wrong .pub is the likely cause, and the fix
  // says so before it sends the operator after a new stick.
  auto r = verify_bundle(b.dir, o);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().fix, Catch::Contains("--trust-key"));
  CHECK_THAT(r.error().fix, Catch::Contains("publisher's public key"));
}

TEST_CASE("an unsigned bundle is refused when a key is trusted", "[bundle]") {
  Bundle b;
  std::filesystem::remove(b.dir + "/bundle.toml.sig");
  expect_refused(b, b.trusting(), {"bundle is not signed"});
}

TEST_CASE("a truncated signature is named as such", "[bundle]") {
  Bundle b;
  std::filesystem::resize_file(b.dir + "/bundle.toml.sig", 20);
  expect_refused(b, b.trusting(),
                 {"bundle.toml.sig: is 20 bytes; an Ed25519 signature is 64"});
}

TEST_CASE("without trust keys the report says the bundle is not vouched for",
          "[bundle]") {
  Bundle b;
  std::filesystem::remove(b.dir + "/bundle.toml.sig");
  VerifyOptions o;
  o.insecure_skip_signature = true;
  auto r = verify_bundle(b.dir, o);
  REQUIRE(r);
  CHECK_FALSE(r->signed_by_trusted_key);
  CHECK(r->key_fingerprint.empty());
  // Files are still checked.
  flip_byte(b.dir + "/images/exact.tar", 1500);
  expect_refused(b, o, {"images/exact.tar: bytes 1024-2047"});
}

TEST_CASE("bundle.toml whose single-chunk sha256 contradicts is refused",
          "[bundle]") {
  Bundle b;
  for (auto& f : b.manifest.files)
    if (f.path == "install.sh") f.sha256 = sha256_hex("other");
  b.seal();
  expect_refused(b, b.trusting(), {"install.sh: sha256 does not match"});
}

TEST_CASE(
    "a signed bundle.toml whose whole-file sha256 of a multi-chunk file is "
    "wrong is refused, naming the file",
    "[bundle]") {
  // Every chunk digest is right: only the whole-file digest (what
  // `sha256sum -c` checks) is wrong, and bundle.toml is validly signed.
  Bundle b;
  for (auto& f : b.manifest.files)
    if (f.path == "images/device-plugin.tar") f.sha256 = sha256_hex("other");
  b.seal();
  for (unsigned threads : {1u, 4u}) {
    VerifyOptions o = b.trusting();
    o.threads = threads;
    expect_refused(b, o,
                   {"images/device-plugin.tar: sha256 of the whole file does "
                    "not match bundle.toml's (5 chunks read)"});
    auto r = verify_bundle(b.dir, o);
    REQUIRE_FALSE(r);
    // Only that file is named: its chunks and the other files are fine.
    CHECK(r.error().message.find('\n') == std::string::npos);
  }
}

TEST_CASE("signatures: sign, check, fingerprint", "[bundle]") {
  auto k = generate_keypair();
  REQUIRE(k);
  CHECK_THAT(k->private_pem, Catch::StartsWith("-----BEGIN PRIVATE KEY-----"));
  CHECK_THAT(k->public_pem, Catch::StartsWith("-----BEGIN PUBLIC KEY-----"));
  auto sig = sign(k->private_pem, "hello");
  REQUIRE(sig);
  CHECK(sig->size() == 64);
  auto ok = signature_valid(k->public_pem, "hello", *sig);
  REQUIRE(ok);
  CHECK(*ok);
  ok = signature_valid(k->public_pem, "hellp", *sig);
  REQUIRE(ok);
  CHECK_FALSE(*ok);
  ok = signature_valid(k->public_pem, "hello", "short");
  REQUIRE(ok);
  CHECK_FALSE(*ok);
  CHECK(key_fingerprint(k->public_pem).size() == 64);
  CHECK(key_fingerprint("not a key").empty());
  CHECK_FALSE(sign("not a key", "x"));
  CHECK_FALSE(signature_valid("not a key", "x", "y"));
}

TEST_CASE("a bundle's verification stops at the deadline and on Ctrl-C",
          "[bundle][limits]") {
  Bundle b;
  VerifyOptions late = b.trusting();
  late.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  auto timed_out = verify_bundle(b.dir, late);
  REQUIRE_FALSE(timed_out);
  CHECK(timed_out.error().exit == ExitCode::kTimeout);
  CHECK_THAT(timed_out.error().message,
             Catch::Contains("the --timeout ran out while walking the bundle"));

  install_interrupt_handlers();
  ::raise(SIGINT);
  auto stopped = verify_bundle(b.dir, b.trusting());
  reset_interrupt_for_tests();
  REQUIRE_FALSE(stopped);
  CHECK(stopped.error().exit == ExitCode::kInterrupted);
  CHECK_THAT(stopped.error().message, Catch::Contains("interrupted by SIGINT"));
  CHECK(verify_bundle(b.dir, b.trusting()));
}

TEST_CASE(
    "a re-signed bundle.toml whose image digest is not the archive's is "
    "refused, naming the image",
    "[bundle][records]") {
  // Every file hash matches and the signature is good: only the digest
  // [[images]] records differs from what the archive's index.json says.
  Bundle b;
  const std::string real = b.manifest.images[0].digest;
  const std::string recorded = "sha256:" + sha256_hex("another image");
  b.manifest.images[0].digest = recorded;
  b.seal();
  for (unsigned threads : {1u, 4u}) {
    VerifyOptions o = b.trusting();
    o.threads = threads;
    expect_refused(
        b, o,
        {"image \"device-plugin\" "
         "(nvcr.io/nvidia/k8s-device-plugin:v0.19.3): bundle.toml "
         "records digest " +
         recorded + ", but images/k8s-device-plugin.tar holds " + real});
  }
}

TEST_CASE(
    "a re-signed bundle.toml whose image ref the archive lacks is refused",
    "[bundle][records]") {
  Bundle b;
  b.manifest.images[0].ref = "nvcr.io/nvidia/k8s-device-plugin:v0.19.4";
  b.seal();
  expect_refused(b, b.trusting(),
                 {"image \"device-plugin\" "
                  "(nvcr.io/nvidia/k8s-device-plugin:v0.19.4): "
                  "images/k8s-device-plugin.tar: holds no image named "
                  "nvcr.io/nvidia/k8s-device-plugin:v0.19.4"});
}

TEST_CASE("an image entry naming a file that is no image archive is refused",
          "[bundle][records]") {
  Bundle b;
  b.manifest.images[0].file = "images/exact.tar";  // listed, hashed, not a tar
  b.seal();
  expect_refused(b, b.trusting(),
                 {"image \"device-plugin\"", "images/exact.tar: not a tar"});
}

TEST_CASE("a docker archive's recorded digest (its config's) verifies",
          "[bundle][records]") {
  Bundle b;
  test::ImageSpec spec;
  spec.platforms = {"linux/amd64"};
  spec.layer_bytes = 64;
  const test::BuiltImage image = test::build_image(
      b.tmp.path() + "/docker.tar", spec, test::ArchiveFormat::kDockerArchive);
  b.add(b.image_file, read_text(image.path));
  b.manifest.files.erase(
      std::find_if(b.manifest.files.begin(), b.manifest.files.end(),
                   [&](const FileEntry& f) { return f.path == b.image_file; }));
  b.manifest.images[0].digest = image.index_digest;
  b.seal();
  CHECK(verify_bundle(b.dir, b.trusting()));
  b.manifest.images[0].digest = "sha256:" + sha256_hex("not the config");
  b.seal();
  expect_refused(b, b.trusting(), {"holds " + image.index_digest});
}

TEST_CASE(
    "a re-signed bundle.toml whose package name, version or arch is not the "
    "package's own is refused, naming it",
    "[bundle][records]") {
  Bundle b;
  const auto debs = test::make_toolkit_packages(b.tmp.path() + "/debs");
  const std::string file = "packages/deb/nvidia-container-toolkit.deb";
  std::string deb;
  for (const auto& path : debs)
    if (path.find("/nvidia-container-toolkit_") != std::string::npos)
      deb = read_text(path);
  REQUIRE_FALSE(deb.empty());
  std::filesystem::create_directories(b.dir + "/packages/deb");
  b.add(file, deb);
  const FileEntry& listed = b.manifest.files.back();
  b.manifest.packages.push_back({"deb", "nvidia-container-toolkit", "1.17.8-1",
                                 "amd64", file, listed.sha256});
  b.seal();
  CHECK(verify_bundle(b.dir, b.trusting()));

  b.manifest.packages[0].version = "1.18.0-1";
  b.seal();
  expect_refused(b, b.trusting(),
                 {"package deb nvidia-container-toolkit 1.18.0-1 amd64 is what "
                  "bundle.toml records, but "
                  "packages/deb/nvidia-container-toolkit.deb says it is deb "
                  "nvidia-container-toolkit 1.17.8-1 amd64"});
  b.manifest.packages[0].version = "1.17.8-1";
  b.manifest.packages[0].name = "libnvidia-container1";
  b.manifest.packages[0].arch = "arm64";
  b.seal();
  expect_refused(b, b.trusting(),
                 {"says it is deb nvidia-container-toolkit 1.17.8-1 amd64"});
}
