// The image stage with containerd's answers scripted (ScriptedRunner in
// place of `k3s ctr`): each branch of its check, and the steps of its apply
// (verify, import, confirm, pin; clean up what a failed import left).
#include <catch2/catch.hpp>

#include "cluster_bed.hpp"
#include "containerd/ctr_client.hpp"
#include "gpunode/image_archive.hpp"
#include "oci_builder.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using test::ClusterBed;

const std::string kDigest =
    "sha256:fc43663d0607f23497a9b1a3429b7efc95db3d65d0490c0dab1eca6774d936f0";

std::string ctr(const std::string& args) { return "k3s ctr -n k8s.io " + args; }

// `ctr images ls` and `ctr images check` as containerd 1.6 prints them
// (the rows of test/unit/ctr_client_test.cpp).
std::string ls_out(const std::string& ref, const std::string& digest,
                   const std::string& labels = "-") {
  return "REF TYPE DIGEST SIZE PLATFORMS LABELS\n" + ref +
         " application/vnd.oci.image.index.v1+json " + digest +
         " 11.1 KiB linux/amd64 " + labels + "\n";
}
std::string check_out(const std::string& ref, const std::string& digest,
                      const std::string& status = "complete (2/2)",
                      bool unpacked = true) {
  return "REF TYPE DIGEST STATUS SIZE UNPACKED\n" + ref +
         " application/vnd.oci.image.index.v1+json " + digest + " " + status +
         " 10.2 KiB/10.2 KiB " + (unpacked ? "true" : "false") + "\n";
}

const std::string kPinned = std::string(kPinnedLabel) + "=pinned";

// A node whose containerd holds (or not) the image.
struct ImageBed {
  ImageBed() : ref(bed.opts.image_ref) {}

  void holds(const std::string& digest, const std::string& labels,
             const std::string& status = "complete (2/2)",
             bool unpacked = true) {
    bed.proc().script(ctr("images ls name==" + ref),
                      ls_out(ref, digest, labels));
    bed.proc().script(ctr("images check name==" + ref),
                      check_out(ref, digest, status, unpacked));
  }
  void holds_nothing() {
    bed.proc().script(ctr("images ls name==" + ref),
                      "REF TYPE DIGEST SIZE PLATFORMS LABELS\n");
  }
  // An OCI archive of the image for this host's platform: --image-archive.
  test::BuiltImage archive(
      test::ArchiveFormat format = test::ArchiveFormat::kOciLayout) {
    test::ImageSpec spec;
    spec.ref_name = ref;
    spec.platforms = {host_platform()};
    auto built = test::build_image(dir.path() + "/dp.tar", spec, format);
    bed.opts.image_archive = built.path;
    return built;
  }
  Check check() { return make_image_stage()->check(bed.context()); }

  ClusterBed bed;
  std::string ref;
  test::TempDir dir;
};

}  // namespace

TEST_CASE("image: complete, unpacked and pinned is satisfied",
          "[cluster-stage][image]") {
  ImageBed t;
  t.holds(kDigest, kPinned);
  Check c = t.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  CHECK(c.code == "image.ok");
  CHECK(c.summary == t.ref + " (" + kDigest.substr(0, 19) +
                         ") is in k3s's containerd, "
                         "complete, pinned");
  CHECK(c.details == std::vector<std::string>{"digest " + kDigest});
  CHECK(c.warnings.empty());
  CHECK(t.bed.proc().unscripted().empty());
}

TEST_CASE("image: a pin k3s owns is warned of", "[cluster-stage][image]") {
  ImageBed t;
  t.holds(kDigest, std::string(kK3sPinnedLabel) + "=pinned," + kPinned);
  Check c = t.check();
  CHECK(c.status == CheckStatus::kSatisfied);
  REQUIRE(c.warnings.size() == 1);
  CHECK_THAT(c.warnings[0],
             Catch::StartsWith("k3s imported this image from "
                               "/var/lib/rancher/k3s/agent/images/ and owns "
                               "its pin"));
}

TEST_CASE("image: not pinned -> pin it, and only that",
          "[cluster-stage][image]") {
  ImageBed t;
  t.holds(kDigest, "-");
  t.bed.proc().script(ctr("images label " + t.ref + " " + kPinned), "");
  auto stage = make_image_stage();
  Check c = stage->check(t.bed.context());
  CHECK(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "image.unpinned");
  CHECK_THAT(c.summary, Catch::EndsWith("complete, not pinned"));
  const std::size_t before = t.bed.proc().calls().size();
  REQUIRE(stage->apply(t.bed.context(), c));
  CHECK(std::vector<std::string>(t.bed.proc().calls().begin() + before,
                                 t.bed.proc().calls().end()) ==
        std::vector<std::string>{ctr("images label " + t.ref + " " + kPinned)});
}

TEST_CASE("image: missing, incomplete or not unpacked, without an archive",
          "[cluster-stage][image]") {
  ImageBed t;
  SECTION("missing: blocked, nothing to import from") {
    t.holds_nothing();
    Check c = t.check();
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "image.missing");
    CHECK(c.summary == t.ref +
                           " is not in k3s's containerd, and no image archive "
                           "was given");
    CHECK_THAT(c.fix, Catch::StartsWith("gpunode install --image-archive"));
  }
  SECTION("incomplete: broken") {
    t.holds(kDigest, kPinned, "incomplete (1/2)");
    Check c = t.check();
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "image.broken");
    CHECK(c.summary == t.ref +
                           " is in containerd but incomplete in containerd "
                           "(incomplete (1/2))");
  }
  SECTION("not unpacked: broken") {
    t.holds(kDigest, kPinned, "complete (2/2)", false);
    Check c = t.check();
    CHECK(c.code == "image.broken");
    CHECK_THAT(c.summary, Catch::EndsWith("but not unpacked for this node"));
  }
}

TEST_CASE("image: containerd that does not answer blocks",
          "[cluster-stage][image]") {
  ImageBed t;
  SECTION("k3s not on PATH") {
    Check c = t.check();
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "image.containerd-unreachable");
    CHECK_THAT(c.summary, Catch::EndsWith("k3s is not on PATH"));
  }
  SECTION("images ls fails") {
    t.bed.proc().script(ctr("images ls name==" + t.ref), "", 1);
    Check c = t.check();
    CHECK(c.code == "image.containerd-unreachable");
    CHECK_THAT(c.summary, Catch::Contains("k3s ctr images ls failed (exit "
                                          "code 1"));
  }
  SECTION("images check fails") {
    t.holds(kDigest, kPinned);
    t.bed.proc().script(ctr("images check name==" + t.ref), "", 2);
    Check c = t.check();
    CHECK(c.code == "image.containerd-unreachable");
    CHECK_THAT(c.summary, Catch::Contains("k3s ctr images check failed"));
  }
}

TEST_CASE("image: with an archive, what containerd lacks is imported",
          "[cluster-stage][image]") {
  ImageBed t;
  const test::BuiltImage built = t.archive();
  SECTION("missing") {
    t.holds_nothing();
    Check c = t.check();
    CHECK(c.status == CheckStatus::kNeeded);
    CHECK(c.code == "image.missing");
    CHECK(c.action ==
          "verify " + built.path + " and import " + t.ref + ", then pin it");
  }
  SECTION("another digest: stale") {
    t.holds(kDigest, kPinned);
    Check c = t.check();
    CHECK(c.status == CheckStatus::kNeeded);
    CHECK(c.code == "image.stale");
    CHECK(c.summary == t.ref + ": containerd holds " + kDigest.substr(0, 19) +
                           ", the "
                           "archive has " +
                           built.index_digest.substr(0, 19));
  }
  SECTION("the archive's digest, not unpacked: stale") {
    t.holds(built.index_digest, kPinned, "complete (2/2)", false);
    Check c = t.check();
    CHECK(c.code == "image.stale");
    CHECK_THAT(c.summary, Catch::EndsWith(": not unpacked for this node"));
  }
  SECTION("the archive's digest, complete and pinned: satisfied") {
    t.holds(built.index_digest, kPinned);
    Check c = t.check();
    CHECK(c.status == CheckStatus::kSatisfied);
    // Not the upstream release's index digest (images/images.lock).
    CHECK(test::any_contains(c.warnings, "not the upstream release's"));
  }
}

TEST_CASE("image: a docker archive is compared by its config digest",
          "[cluster-stage][image]") {
  // ctr writes a manifest of its own for a docker archive: containerd's
  // record digest is that manifest's; its config is the shared identity.
  ImageBed t;
  const test::BuiltImage built = t.archive(test::ArchiveFormat::kDockerArchive);
  t.holds(kDigest, kPinned);
  const std::string content = ctr("content get " + kDigest);
  SECTION("the same config: satisfied") {
    t.bed.proc().script(
        content, "{\"config\": {\"digest\": \"" + built.index_digest + "\"}}");
    Check c = t.check();
    CHECK(c.status == CheckStatus::kSatisfied);
    CHECK(c.code == "image.ok");
  }
  SECTION("the manifest cannot be read: unreachable") {
    t.bed.proc().script(content, "", 1);
    Check c = t.check();
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "image.containerd-unreachable");
    CHECK_THAT(c.summary, Catch::Contains("k3s ctr content get failed"));
  }
}

TEST_CASE("image: a damaged archive blocks before containerd is asked",
          "[cluster-stage][image]") {
  ImageBed t;
  t.bed.opts.image_archive = t.dir.path() + "/dp.tar";
  test::write_text(*t.bed.opts.image_archive, "not a tar at all");
  Check c = t.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "image.archive-invalid");
  CHECK(t.bed.proc().calls().empty());
}

TEST_CASE("image: a bundle that does not verify blocks",
          "[cluster-stage][image]") {
  ImageBed t;
  t.bed.opts.bundle = t.dir.path() + "/no-such-bundle";
  Check c = t.check();
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "image.bundle");
  CHECK(t.bed.proc().calls().empty());
}

TEST_CASE("image: apply verifies, imports, confirms and pins",
          "[cluster-stage][image]") {
  ImageBed t;
  const test::BuiltImage built = t.archive();
  const std::string repo = "nvcr.io/nvidia/k8s-device-plugin";
  REQUIRE(t.ref.rfind(repo + ":", 0) == 0);
  const std::string import =
      ctr("images import --base-name " + repo + " " + built.path);
  const std::string ls = ctr("images ls name==" + t.ref);
  const std::string check = ctr("images check name==" + t.ref);
  const std::string pin = ctr("images label " + t.ref + " " + kPinned);
  const std::string rm = ctr("images rm " + t.ref);
  Check missing;
  missing.code = "image.missing";
  SECTION("it lands") {
    t.bed.proc().script(import, "unpacking ... done\n");
    t.holds(built.index_digest, "-");
    t.bed.proc().script(pin, "");
    REQUIRE(make_image_stage()->apply(t.bed.context(), missing));
    CHECK(t.bed.proc().calls() ==
          std::vector<std::string>{import, ls, check, pin});
  }
  SECTION("the import fails: its record is removed") {
    t.bed.proc().script(import, "ctr: failed to ingest\n", 1);
    t.holds(built.index_digest, "-", "incomplete (1/2)");
    t.bed.proc().script(rm, "");
    auto applied = make_image_stage()->apply(t.bed.context(), missing);
    REQUIRE_FALSE(applied);
    CHECK(t.bed.proc().calls() == std::vector<std::string>{import, ls, rm});
  }
  SECTION("imported but not there") {
    t.bed.proc().script(import, "");
    t.holds_nothing();
    auto applied = make_image_stage()->apply(t.bed.context(), missing);
    REQUIRE_FALSE(applied);
    CHECK(applied.error().message == "k3s ctr images import finished but " +
                                         t.ref + " is not in containerd");
  }
  SECTION("imported as another digest: integrity, record removed") {
    t.bed.proc().script(import, "");
    t.holds(kDigest, "-", "incomplete (1/2)");
    t.bed.proc().script(rm, "");
    auto applied = make_image_stage()->apply(t.bed.context(), missing);
    REQUIRE_FALSE(applied);
    CHECK(applied.error().exit == ExitCode::kIntegrity);
    CHECK_THAT(applied.error().message,
               Catch::Contains("after the import, but the verified archive "
                               "has " +
                               built.index_digest));
    CHECK(t.bed.proc().calls() ==
          std::vector<std::string>{import, ls, check, ls, rm});
  }
  SECTION("imported incomplete: integrity, record removed") {
    t.bed.proc().script(import, "");
    t.holds(built.index_digest, "-", "incomplete (1/2)");
    t.bed.proc().script(rm, "");
    auto applied = make_image_stage()->apply(t.bed.context(), missing);
    REQUIRE_FALSE(applied);
    CHECK(applied.error().exit == ExitCode::kIntegrity);
    CHECK_THAT(applied.error().message,
               Catch::EndsWith("was imported but is incomplete in containerd "
                               "(incomplete (1/2)); the record was removed"));
    CHECK(t.bed.proc().calls().back() == rm);
  }
}

TEST_CASE("image: apply refuses a damaged archive before containerd sees it",
          "[cluster-stage][image]") {
  ImageBed t;
  test::ImageSpec spec;
  spec.ref_name = t.ref;
  spec.platforms = {host_platform()};
  t.bed.opts.image_archive =
      test::build_image(t.dir.path() + "/dp.tar", spec,
                        test::ArchiveFormat::kOciLayout,
                        test::Compression::kNone, test::Damage::kCorruptLayer)
          .path;
  Check missing;
  missing.code = "image.missing";
  auto applied = make_image_stage()->apply(t.bed.context(), missing);
  REQUIRE_FALSE(applied);
  CHECK(applied.error().exit == ExitCode::kIntegrity);
  CHECK(t.bed.proc().calls().empty());
}

TEST_CASE("image: a compressed archive is piped to ctr",
          "[cluster-stage][image]") {
  ImageBed t;
  test::ImageSpec spec;
  spec.ref_name = t.ref;
  spec.platforms = {host_platform()};
  const test::BuiltImage built = test::build_image(
      t.dir.path() + "/dp.tar.gz", spec, test::ArchiveFormat::kOciLayout,
      test::Compression::kGzip);
  t.bed.opts.image_archive = built.path;
  const std::string import =
      ctr("images import --base-name nvcr.io/nvidia/k8s-device-plugin -");
  t.bed.proc().script(import, "");
  t.holds(built.index_digest, "-");
  t.bed.proc().script(ctr("images label " + t.ref + " " + kPinned), "");
  Check missing;
  missing.code = "image.missing";
  REQUIRE(make_image_stage()->apply(t.bed.context(), missing));
  REQUIRE_FALSE(t.bed.proc().calls().empty());
  CHECK(t.bed.proc().calls().front() == import);
}

}  // namespace gpunode
