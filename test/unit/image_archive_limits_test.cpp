// Image archive verification is bounded (issue 11, item 7): an index that
// lists one child many times at every level costs what its size does; the
// deadline and Ctrl-C end it. It refuses what containerd cannot unpack (no
// layers, unknown layer or config media types, layers that do not pair
// with diff_ids, an index listing nothing) instead of letting `ctr` fail
// later; and it says what the import takes on disk from the sizes the
// archive declares, not the compressed file's (item 8).
#include <archive.h>
#include <archive_entry.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "gpunode/digest.hpp"
#include "gpunode/image_archive.hpp"
#include "gpunode/interrupt.hpp"
#include "oci_docs.hpp"

namespace gpunode {
namespace {

using test::OciDocs;

const std::string kRef = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";
const std::string kPlatform = "linux/amd64";

// A valid image; returns the manifest's descriptor.
std::string one_image(OciDocs& d, const std::string& layer = "layer tar") {
  const std::string l = d.blob(test::kOciLayerType, layer);
  return d.manifest(d.config({test::digest_of_desc(l)}), {l});
}

// index.json -> index -> ... -> index -> manifest, each index listing its
// child `copies` times: copies^levels paths to the one manifest.
std::string fan_out(std::size_t copies, int levels,
                    const std::string& platform = kPlatform) {
  OciDocs d;
  const std::string l = d.blob(test::kOciLayerType, "layer tar");
  std::string child =
      d.manifest(d.config({test::digest_of_desc(l)}), {l}, platform);
  for (int i = 0; i < levels; ++i) child = d.index(child, copies);
  return d.tar(child, kRef);
}

Result<ImageArchiveInfo> verify(
    const std::string& tar, std::chrono::steady_clock::time_point deadline =
                                std::chrono::steady_clock::time_point::max()) {
  return verify_image_archive_bytes(tar, "image.tar", kRef, kPlatform,
                                    deadline);
}

// `data` as one gzip member (libarchive's raw format with its gzip filter).
std::string gzip(const std::string& data) {
  std::string buf(data.size() / 2 + 65536, '\0');
  std::size_t used = 0;
  archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_raw(a);
  REQUIRE(archive_write_open_memory(a, buf.data(), buf.size(), &used) ==
          ARCHIVE_OK);
  archive_entry* e = archive_entry_new();
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
  REQUIRE(archive_write_header(a, e) == ARCHIVE_OK);
  REQUIRE(archive_write_data(a, data.data(), data.size()) ==
          static_cast<la_ssize_t>(data.size()));
  archive_entry_free(e);
  REQUIRE(archive_write_close(a) == ARCHIVE_OK);
  archive_write_free(a);
  buf.resize(used);
  return buf;
}

void expect_malformed(const std::string& tar, const std::string& fragment) {
  auto r = verify(tar);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
  CHECK(r.error().layer == "image");
  CHECK_THAT(r.error().message, Catch::Contains(fragment));
}

}  // namespace

TEST_CASE("an index repeating its children is walked once per document",
          "[image][limits]") {
  // 10 copies at 3 levels: 1000 paths to the manifest, 4 documents.
  auto r = verify(fan_out(10, 3));
  REQUIRE(r);
  CHECK(r->documents_walked == 4);
  CHECK(r->platforms == std::vector<std::string>{kPlatform});
}

TEST_CASE("a fan-out archive of 10^12 paths verifies in well under a second",
          "[image][limits]") {
  // 1000 copies at 4 levels (the nesting limit): ~400 KB of JSON.
  const std::string tar = fan_out(1000, 4);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = verify(tar);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  REQUIRE(r);
  CHECK(r->documents_walked == 5);
  CHECK(s < 2.0);  // measured ~0.05 s; generous for a loaded machine
}

TEST_CASE("the deadline and a Ctrl-C stop an archive's verification",
          "[image][limits]") {
  const std::string tar = fan_out(10, 2);
  auto late =
      verify(tar, std::chrono::steady_clock::now() - std::chrono::seconds(1));
  REQUIRE_FALSE(late);
  CHECK(late.error().exit == ExitCode::kTimeout);
  CHECK_THAT(late.error().message,
             Catch::Contains("--timeout ran out while verifying the image "
                             "archive image.tar"));
  CHECK_THAT(late.error().fix, Catch::Contains("longer --timeout"));

  install_interrupt_handlers();
  ::raise(SIGINT);
  auto stopped = verify(tar);
  reset_interrupt_for_tests();
  REQUIRE_FALSE(stopped);
  CHECK(stopped.error().exit == ExitCode::kInterrupted);
  CHECK_THAT(stopped.error().message, Catch::Contains("interrupted by SIGINT"));
  CHECK(verify(tar));  // and nothing is left over for the next one
}

TEST_CASE("images containerd cannot unpack are refused by name",
          "[image][limits]") {
  SECTION("no layers") {
    OciDocs d;
    const std::string m = d.manifest(d.config({}), {});
    expect_malformed(d.tar(m, kRef), "has no layers");
  }
  SECTION("a layer of an unknown media type") {
    OciDocs d;
    const std::string l = d.blob("application/vnd.example.thing", "layer");
    const std::string m = d.manifest(d.config({test::digest_of_desc(l)}), {l});
    expect_malformed(d.tar(m, kRef),
                     "has media type 'application/vnd.example.thing', which "
                     "containerd cannot unpack");
  }
  SECTION("a layer with no media type") {
    OciDocs d;
    const std::string l = d.blob("", "layer");
    const std::string m = d.manifest(d.config({test::digest_of_desc(l)}), {l});
    expect_malformed(d.tar(m, kRef), "has media type ''");
  }
  SECTION("an encrypted layer (needs ocicrypt keys)") {
    OciDocs d;
    const std::string l =
        d.blob("application/vnd.oci.image.layer.v1.tar+gzip+encrypted", "x");
    const std::string m = d.manifest(d.config({test::digest_of_desc(l)}), {l});
    expect_malformed(d.tar(m, kRef), "which containerd cannot unpack");
  }
  SECTION("a config that is not an image config (an artifact)") {
    OciDocs d;
    const std::string l = d.blob(test::kOciLayerType, "layer");
    const std::string m = d.manifest(
        d.config({test::digest_of_desc(l)}, "application/vnd.example.config"),
        {l});
    expect_malformed(d.tar(m, kRef),
                     "config of media type 'application/vnd.example.config'");
  }
  SECTION("layers that do not pair with the config's diff_ids") {
    OciDocs d;
    const std::string l = d.blob(test::kOciLayerType, "layer");
    const std::string m = d.manifest(d.config({}), {l});
    expect_malformed(d.tar(m, kRef),
                     "lists 1 layers but its config's rootfs.diff_ids lists 0");
  }
  SECTION("an index that lists no manifests") {
    OciDocs d;
    const std::string idx = d.index(one_image(d), 0);
    expect_malformed(d.tar(idx, kRef), "lists no manifests");
  }
  SECTION("and the same layer twice is fine (it is legal, and unpacks)") {
    OciDocs d;
    const std::string l = d.blob(test::kOciLayerType, "layer");
    const std::string id = test::digest_of_desc(l);
    const std::string m = d.manifest(d.config({id, id}), {l, l});
    CHECK(verify(d.tar(m, kRef)));
  }
}

TEST_CASE("the disk an import takes is what the archive declares",
          "[image][limits]") {
  // A gzip layer whose trailer says 8 MiB: the snapshot takes 8 MiB, not
  // the few KiB of the blob.
  const std::string big(8u << 20, 'a');
  const std::string gz = gzip(big);
  REQUIRE(gz.size() < big.size() / 100);

  OciDocs d;
  const std::string l =
      d.blob("application/vnd.oci.image.layer.v1.tar+gzip", gz);
  const std::string m =
      d.manifest(d.config({"sha256:" + sha256_hex(big)}), {l});
  const std::string tar = d.tar(m, kRef);
  auto r = verify(tar);
  REQUIRE(r);
  CHECK(r->unpacked_bytes == big.size());
  // The content store keeps every member as it is in the tar.
  CHECK(r->stored_bytes > gz.size());
  CHECK(r->stored_bytes < tar.size());
}

}  // namespace gpunode
