// ctr's table output, as containerd 1.6 prints it (captured from a real run).
#include "containerd/ctr_client.hpp"

#include <catch2/catch.hpp>

using namespace gpunode;

namespace {
const char* kLs =
    "REF                                      TYPE                             "
    "       DIGEST       "
    "                                                           SIZE     "
    "PLATFORMS               "
    "LABELS                          \n"
    "import-2026-11-29:v0.19.3                "
    "application/vnd.oci.image.index.v1+json "
    "sha256:fc43663d0607f23497a9b1a3429b7efc95db3d65d0490c0dab1eca6774d936f0 "
    "11.1 KiB "
    "linux/amd64,linux/arm64 -                               \n"
    "nvcr.io/nvidia/k8s-device-plugin:v0.19.3 "
    "application/vnd.oci.image.index.v1+json "
    "sha256:fc43663d0607f23497a9b1a3429b7efc95db3d65d0490c0dab1eca6774d936f0 "
    "11.1 KiB "
    "linux/amd64,linux/arm64 "
    "io.cattle.k3s.pinned=pinned,io.cri-containerd.pinned=pinned \n";
const char* kCheck =
    "REF                                      TYPE                             "
    "       DIGEST       "
    "                                                           STATUS         "
    "SIZE              "
    "UNPACKED \n"
    "import-2026-11-29:v9                     "
    "application/vnd.oci.image.index.v1+json "
    "sha256:fc43663d0607f23497a9b1a3429b7efc95db3d65d0490c0dab1eca6774d936f0 "
    "incomplete (1/2) "
    "5.1 KiB/10.2 KiB  false\n"
    "nvcr.io/nvidia/k8s-device-plugin:v0.19.3 "
    "application/vnd.oci.image.index.v1+json "
    "sha256:fc43663d0607f23497a9b1a3429b7efc95db3d65d0490c0dab1eca6774d936f0 "
    "complete (2/2) "
    "10.2 KiB/10.2 KiB true\n";
}  // namespace

TEST_CASE("ctr images ls rows give ref, type, digest and labels", "[ctr]") {
  auto rows = CtrClient::parse_images_ls(kLs);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].ref == "import-2026-11-29:v0.19.3");
  CHECK(rows[0].labels.empty());
  CHECK(rows[1].ref == "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  CHECK(rows[1].media_type == "application/vnd.oci.image.index.v1+json");
  CHECK(rows[1].digest ==
        "sha256:"
        "fc43663d0607f23497a9b1a3429b7efc95db3d65d0490c0dab1eca6774d936f0");
  CHECK(rows[1].has_label(kPinnedLabel, "pinned"));
  CHECK(rows[1].has_label(kK3sPinnedLabel, "pinned"));
  CHECK_FALSE(rows[0].has_label(kPinnedLabel, "pinned"));
  CHECK(CtrClient::parse_images_ls("REF TYPE DIGEST SIZE PLATFORMS LABELS\n")
            .empty());
}

TEST_CASE("ctr images check rows say complete and unpacked", "[ctr]") {
  auto good = CtrClient::parse_images_check(
      kCheck, "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  REQUIRE(good);
  CHECK(good->complete);
  CHECK(good->unpacked);
  CHECK(good->status == "complete (2/2)");
  auto bad = CtrClient::parse_images_check(kCheck, "import-2026-11-29:v9");
  REQUIRE(bad);
  CHECK_FALSE(bad->complete);
  CHECK_FALSE(bad->unpacked);
  CHECK(bad->status == "incomplete (1/2)");
  CHECK_FALSE(CtrClient::parse_images_check(kCheck, "other:tag"));
}
