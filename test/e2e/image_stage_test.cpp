// The image layer end to end: the real gpunode binary, a real containerd
// (started by the tests on a private socket, `k3s ctr` forwarded to it), and
// image archives the tests build themselves.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "containerd_fixture.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using gpunode::ExitCode;

namespace {

const std::string kRef = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";

// A host tree and a `k3s` on PATH that logs each call, then forwards to the
// test containerd: the log proves what gpunode asked containerd to do.
struct ImageNode {
  TempDir dir;
  std::string root = dir.path() + "/node";
  std::string bin = dir.path() + "/bin";
  std::string log = dir.path() + "/k3s.log";
  Containerd& ctd = Containerd::shared();

  ImageNode() {
    ctd.reset();
    make_host_tree(root, "good-v3");
    write_text(bin + "/k3s",
               "#!/bin/sh\necho \"$*\" >>" + log + "\nexec " + ctd.bin_dir() +
                   "/k3s \"$@\"\n",
               0755);
  }
  std::vector<std::string> env() const {
    const char* path = std::getenv("PATH");
    return {"PATH=" + bin + ":" + std::string(GPUNODE_TEST_SIM) +
            "/bin:" + (path ? path : "/usr/bin:/bin")};
  }
  Run install(const std::string& archive, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"install", "--root", root, "--only", "image"};
    if (!archive.empty()) {
      args.push_back("--image-archive");
      args.push_back(archive);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return run_gpunode(args, env());
  }
  std::string calls() const {
    struct stat st {};
    return ::stat(log.c_str(), &st) == 0 ? read_text(log) : "";
  }
  int imports() const {
    int n = 0;
    std::istringstream in(calls());
    std::string line;
    while (std::getline(in, line))
      n += line.find("images import") != std::string::npos;
    return n;
  }
  // The image row as containerd shows it, or "" when absent.
  std::string row(const std::string& ref = kRef) {
    auto r = ctd.ctr({"images", "ls", "name==" + ref});
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(ref + " ", 0) == 0) return line;
    }
    return "";
  }
  // containerd collects unreferenced content (the leases of a finished
  // import) in the background, so read the store once it has settled.
  // containerd's garbage collector drops the blobs an import left
  // unreferenced (other platforms) some time later; on a loaded machine
  // more than 100 ms later. Settled = unchanged for half a second.
  std::map<std::string, std::string> settled_content() {
    auto last = ctd.content_digests();
    int stable = 0;
    for (int i = 0; i < 100 && stable < 5; ++i) {
      ::usleep(100 * 1000);
      auto now = ctd.content_digests();
      stable = now == last ? stable + 1 : 0;
      last = std::move(now);
    }
    return last;
  }
  bool complete(const std::string& ref = kRef) {
    auto r = ctd.ctr({"images", "check", "name==" + ref});
    return r.out.find(" complete ") != std::string::npos;
  }
};

#define REQUIRE_CONTAINERD()                                             \
  if (!containerd_available()) {                                         \
    WARN("containerd/ctr not installed or not root: test not run");      \
    FAIL("the image tests need Debian's containerd (scripts/setup.sh)"); \
  }

}  // namespace

TEST_CASE(
    "a good archive is verified, imported, named, pinned, a rerun imports "
    "nothing",
    "[e2e][image][containerd]") {
  REQUIRE_CONTAINERD();
  struct Variant {
    const char* what;
    ImageSpec spec;
    ArchiveFormat format;
    Compression compression;
  };
  ImageSpec tag_only;
  tag_only.ref_name = "v0.19.3";
  ImageSpec single;
  single.platforms = {"linux/amd64"};
  ImageSpec index_first;
  index_first.index_first = true;
  const std::vector<Variant> variants = {
      {"OCI, two platforms", ImageSpec{}, ArchiveFormat::kOciLayout,
       Compression::kNone},
      {"OCI, tag-only name", tag_only, ArchiveFormat::kOciLayout,
       Compression::kNone},
      {"OCI, one platform", single, ArchiveFormat::kOciLayout,
       Compression::kNone},
      {"OCI, index first", index_first, ArchiveFormat::kOciLayout,
       Compression::kNone},
      {"OCI, gzip", ImageSpec{}, ArchiveFormat::kOciLayout, Compression::kGzip},
      {"OCI, zstd", ImageSpec{}, ArchiveFormat::kOciLayout, Compression::kZstd},
      {"docker archive", single, ArchiveFormat::kDockerArchive,
       Compression::kNone},
  };
  for (const auto& v : variants) {
    SECTION(v.what) {
      ImageNode node;
      const std::string archive = node.dir.path() + "/image.tar";
      BuiltImage built = build_image(archive, v.spec, v.format, v.compression);
      Run r = node.install(archive);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.err,
                 Catch::Contains("[image]") && Catch::Contains("applied"));
      const std::string row = node.row();
      REQUIRE_FALSE(row.empty());
      if (v.format == ArchiveFormat::kOciLayout) {
        CHECK_THAT(row, Catch::Contains(built.index_digest));
      }
      CHECK_THAT(row, Catch::Contains("io.cri-containerd.pinned=pinned"));
      CHECK(node.complete());
      CHECK(node.imports() == 1);
      // The archive is read, never written.
      CHECK(read_text(archive).size() == built.bytes);

      Run again = node.install(archive);
      INFO(again.err);
      CHECK(again.exit_code == 0);
      CHECK(node.imports() == 1);
      CHECK_THAT(again.err, Catch::Contains("pinned"));
      CHECK(again.err.find("applying") == std::string::npos);
    }
  }
}

TEST_CASE(
    "every bad archive is refused before import, naming the problem, "
    "containerd unchanged",
    "[e2e][image][containerd]") {
  REQUIRE_CONTAINERD();
  struct Case {
    const char* what;
    Damage damage;
    int exit_code;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {"truncated", Damage::kTruncated, 4, "truncated"},
      {"corrupted layer", Damage::kCorruptLayer, 4, "is corrupt"},
      {"digest mismatch", Damage::kManifestDigestMismatch, 4,
       "missing from the archive"},
      {"size mismatch", Damage::kSizeMismatch, 4, "bytes but is"},
      {"missing blob", Damage::kMissingBlob, 4, "missing from the archive"},
      {"missing index", Damage::kMissingIndex, 2, "neither index.json"},
      {"path traversal", Damage::kPathTraversal, 2, "climbs out"},
      {"absolute path", Damage::kAbsolutePath, 2, "absolute path"},
      {"symlink entry", Damage::kSymlinkEntry, 2, "symbolic link"},
      {"hardlink entry", Damage::kHardlinkEntry, 2, "hard link"},
      {"not a tar", Damage::kNotATar, 2, "not a tar archive"},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      ImageNode node;
      // Containerd already holds another image: it must stay as it is.
      const std::string other = node.dir.path() + "/other.tar";
      ImageSpec other_spec;
      other_spec.ref_name = "registry.local/other:1";
      other_spec.seed = 99;
      build_image(other, other_spec);
      REQUIRE(node.ctd.ctr({"images", "import", other}).succeeded());
      const auto images_before = node.ctd.image_names();
      const auto content_before = node.settled_content();
      const auto tree_before = snapshot_tree(node.root + "/etc");

      const std::string archive = node.dir.path() + "/bad.tar";
      build_image(archive, ImageSpec{}, ArchiveFormat::kOciLayout,
                  Compression::kNone, c.damage);
      Run r = node.install(archive);
      INFO(r.err);
      CHECK(r.exit_code == c.exit_code);
      CHECK_THAT(r.err, Catch::Contains(c.fragment));
      CHECK_THAT(r.err, Catch::Contains("[ERROR image]"));
      CHECK(node.imports() == 0);
      CHECK(node.ctd.image_names() == images_before);
      CHECK(node.settled_content() == content_before);
      CHECK(snapshot_tree(node.root + "/etc") == tree_before);
    }
  }
}

TEST_CASE(
    "a damaged docker archive is refused: corrupt layer and missing config",
    "[e2e][image][containerd]") {
  REQUIRE_CONTAINERD();
  ImageSpec single;
  single.platforms = {"linux/amd64"};
  for (auto damage : {Damage::kCorruptLayer, Damage::kMissingBlob}) {
    ImageNode node;
    const std::string archive = node.dir.path() + "/bad.tar";
    build_image(archive, single, ArchiveFormat::kDockerArchive,
                Compression::kNone, damage);
    Run r = node.install(archive);
    INFO(r.err);
    CHECK(r.exit_code == 4);
    CHECK(node.imports() == 0);
    CHECK(node.ctd.image_names().empty());
  }
}

TEST_CASE(
    "a corrupt archive is refused even when containerd already has the good "
    "blobs",
    "[e2e][image][containerd]") {
  REQUIRE_CONTAINERD();
  // ctr itself would accept it: the blobs of an earlier import hide the bad
  // layer (FACTS.md). gpunode hashes the archive, so it does not.
  ImageNode node;
  const std::string good = node.dir.path() + "/good.tar";
  build_image(good, ImageSpec{});
  REQUIRE(node.ctd.ctr({"images", "import", good}).succeeded());
  REQUIRE(node.ctd.ctr({"images", "rm", kRef}).succeeded());
  const std::string bad = node.dir.path() + "/bad.tar";
  build_image(bad, ImageSpec{}, ArchiveFormat::kOciLayout, Compression::kNone,
              Damage::kCorruptLayer);
  Run r = node.install(bad);
  CHECK(r.exit_code == 4);
  CHECK(node.row().empty());
}

TEST_CASE("the wrong image or only another platform is refused with exit 2",
          "[e2e][image][containerd]") {
  REQUIRE_CONTAINERD();
  ImageNode node;
  SECTION("another image") {
    ImageSpec spec;
    spec.ref_name = "nvcr.io/nvidia/k8s-device-plugin:v0.17.0";
    const std::string archive = node.dir.path() + "/old.tar";
    build_image(archive, spec);
    Run r = node.install(archive);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("holds no image named " + kRef));
    CHECK_THAT(r.err, Catch::Contains("v0.17.0"));
  }
  SECTION("only arm64") {
    ImageSpec spec;
    spec.platforms = {"linux/arm64"};
    const std::string archive = node.dir.path() + "/arm.tar";
    build_image(archive, spec);
    Run r = node.install(archive);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("platform linux/amd64"));
  }
  CHECK(node.imports() == 0);
  CHECK(node.ctd.image_names().empty());
}

TEST_CASE(
    "without an archive a missing image blocks with the fix, a present one is "
    "judged",
    "[e2e][image][containerd]") {
  REQUIRE_CONTAINERD();
  ImageNode node;
  Run r = node.install("");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("--image-archive"));
  CHECK_THAT(r.err, Catch::Contains("cannot pull"));

  // Imported by someone else, unpinned: gpunode pins it, importing nothing.
  const std::string archive = node.dir.path() + "/image.tar";
  build_image(archive, ImageSpec{});
  REQUIRE(node.ctd.ctr({"images", "import", archive}).succeeded());
  Run pinned = node.install("");
  INFO(pinned.err);
  CHECK(pinned.exit_code == 0);
  CHECK_THAT(node.row(), Catch::Contains("io.cri-containerd.pinned=pinned"));
  CHECK(node.imports() == 0);
}

TEST_CASE(
    "an incomplete image in containerd is imported again and ends complete",
    "[e2e][image][containerd]") {
  REQUIRE_CONTAINERD();
  ImageNode node;
  const std::string archive = node.dir.path() + "/image.tar";
  BuiltImage built = build_image(archive, ImageSpec{});
  REQUIRE(node.install(archive).exit_code == 0);
  // Lose a layer (disk trouble, a careless prune): the record stays.
  auto content = node.ctd.content_digests();
  std::string layer;
  for (const auto& [digest, size] : content) {
    if (digest != built.index_digest &&
        built.manifest_digests.at("linux/amd64") != digest &&
        size.find("kB") != std::string::npos) {
      layer = digest;
    }
  }
  REQUIRE_FALSE(layer.empty());
  REQUIRE(node.ctd.ctr({"content", "rm", layer}).succeeded());
  REQUIRE_FALSE(node.complete());

  Run status = run_gpunode({"status", "--root", node.root, "--only", "image"},
                           node.env());
  CHECK(status.exit_code == 1);
  Run r = node.install(archive);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(node.complete());
  CHECK(node.imports() == 2);
}

TEST_CASE(
    "an image k3s pinned from its images folder is accepted with a warning",
    "[e2e][image][containerd]") {
  REQUIRE_CONTAINERD();
  ImageNode node;
  const std::string archive = node.dir.path() + "/image.tar";
  build_image(archive, ImageSpec{});
  REQUIRE(node.ctd.ctr({"images", "import", archive}).succeeded());
  REQUIRE(node.ctd
              .ctr({"images", "label", kRef, "io.cattle.k3s.pinned=pinned",
                    "io.cri-containerd.pinned=pinned"})
              .succeeded());
  Run r = node.install(archive);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("owns its pin"));
  CHECK(node.imports() == 0);
}

TEST_CASE(
    "a disk that fills during the import stops it and says so and leaves "
    "no image record",
    "[e2e][image][containerd]") {
  REQUIRE_CONTAINERD();
  ImageNode node;  // containerd emptied
  // containerd's content store on an 8 MiB tmpfs: the 16 MiB layer cannot
  // fit. Emptied and unmounted again after the test, whatever happens.
  struct SmallStore {
    Containerd& ctd;
    std::string at;
    ~SmallStore() {
      if (at.empty()) return;
      try {
        ctd.reset();
      } catch (...) {
      }
      ::umount2(at.c_str(), MNT_DETACH);
    }
  } store{node.ctd, ""};
  const std::string content =
      node.ctd.root_dir() + "/io.containerd.content.v1.content";
  std::filesystem::create_directories(content);
  REQUIRE(::mount("tmpfs", content.c_str(), "tmpfs", 0, "size=8m,mode=0700") ==
          0);
  store.at = content;
  std::filesystem::create_directories(content + "/ingest");
  std::filesystem::create_directories(content + "/blobs/sha256");
  ImageSpec spec;
  spec.platforms = {"linux/amd64"};
  spec.layer_bytes = 16u << 20;  // pseudo-random: does not compress
  const std::string archive = node.dir.path() + "/image.tar";
  build_image(archive, spec);
  Run r = node.install(archive);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("is full (") &&
                        Catch::Contains("no space left on device"));
  CHECK_THAT(r.err, Catch::Contains("crictl rmi --prune"));
  CHECK(node.imports() == 1);
  // Nothing claims the name: no record, complete or not.
  CHECK(node.row().empty());
}

namespace {

// The node's files that turn k3s's embedded registry mirror on for nvcr.io.
void mirror_on(ImageNode& node, bool agent = false) {
  write_mirror_files(node.root, agent);
}

int count_calls(const ImageNode& node, const std::string& what) {
  int n = 0;
  std::istringstream in(node.calls());
  for (std::string line; std::getline(in, line);)
    n += line.find(what) != std::string::npos;
  return n;
}

const std::string kSourceLabel =
    "containerd.io/distribution.source.nvcr.io=nvidia/k8s-device-plugin";

// Each blob in the store, with whether it carries the distribution-source
// label (ctr content ls: DIGEST SIZE AGE LABELS).
std::map<std::string, bool> labelled_blobs(ImageNode& node) {
  std::map<std::string, bool> out;
  auto r = node.ctd.ctr({"content", "ls"});
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("sha256:", 0) != 0) continue;
    out[line.substr(0, line.find_first_of(" \t"))] =
        line.find(kSourceLabel) != std::string::npos;
  }
  return out;
}

nlohmann::json image_event(const Run& r) {
  std::istringstream in(r.out);
  nlohmann::json last;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("event", "") == "stage" && j.value("stage", "") == "image")
      last = j;
  }
  return last;
}

}  // namespace

TEST_CASE(
    "with the embedded mirror on, the import gets a pinned digest reference "
    "and labelled content, and a rerun writes nothing",
    "[e2e][image][containerd][mirror]") {
  REQUIRE_CONTAINERD();
  ImageNode node;
  mirror_on(node);
  ImageSpec single;
  single.platforms = {"linux/amd64"};
  const std::string archive = node.dir.path() + "/image.tar";
  BuiltImage built = build_image(archive, single);
  Run r = node.install(archive);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string digest_ref =
      "nvcr.io/nvidia/k8s-device-plugin@" + built.index_digest;
  const std::string row = node.row(digest_ref);
  REQUIRE_FALSE(row.empty());
  CHECK_THAT(row, Catch::Contains(built.index_digest) &&
                      Catch::Contains("io.cri-containerd.pinned=pinned"));
  CHECK_THAT(node.row(), Catch::Contains("io.cri-containerd.pinned=pinned"));
  node.settled_content();
  const auto blobs = labelled_blobs(node);
  CHECK(blobs.size() >= 3);  // index, manifest, config (and layers)
  for (const auto& [digest, labelled] : blobs) {
    INFO(digest);
    CHECK(labelled);
  }
  const int tags = count_calls(node, "images tag");
  const int labels = count_calls(node, "content label");
  CHECK(tags == 1);
  CHECK(labels == static_cast<int>(blobs.size()));

  Run again = node.install(archive);
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(again.err.find("applying") == std::string::npos);
  CHECK(count_calls(node, "images tag") == tags);
  CHECK(count_calls(node, "content label") == labels);
  CHECK(node.imports() == 1);

  Run status = run_gpunode(
      {"status", "--root", node.root, "--only", "image", "--json"}, node.env());
  const auto ev = image_event(status);
  CHECK(ev.value("code", "") == "image.ok");
  CHECK(ev["facts"]["mirror"]["enabled"] == true);
  CHECK(ev["facts"]["mirror"]["registry_mirrored"] == true);
  CHECK(ev["facts"]["mirror"]["embedded_registry"] == true);
  CHECK(ev["facts"]["mirror"]["source"] == "/etc/rancher/k3s/config.yaml");
  CHECK(ev["facts"]["mirror"]["shareable"] == true);
  CHECK(ev["facts"]["image"]["digest"] == built.index_digest);
  CHECK(ev["facts"]["image"]["pinned"] == true);
}

TEST_CASE(
    "an image imported without the mirror's shape is needed once the mirror "
    "is on, and shaped without a new import",
    "[e2e][image][containerd][mirror]") {
  REQUIRE_CONTAINERD();
  ImageNode node;
  const std::string archive = node.dir.path() + "/image.tar";
  build_image(archive, ImageSpec{});
  REQUIRE(node.install(archive).exit_code == 0);
  CHECK(count_calls(node, "images tag") == 0);  // as before: no mirror
  CHECK(count_calls(node, "content label") == 0);
  mirror_on(node);
  Run status = run_gpunode(
      {"status", "--root", node.root, "--only", "image", "--json"}, node.env());
  const auto ev = image_event(status);
  CHECK(ev.value("status", "") == "would-apply");  // status: what install does
  CHECK(ev.value("code", "") == "image.unshared");
  CHECK(ev["facts"]["mirror"]["shareable"] == false);
  CHECK_THAT(ev.value("summary", ""),
             Catch::Contains("no digest reference nvcr.io/nvidia/"
                             "k8s-device-plugin@sha256:"));
  Run r = node.install(archive);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(node.imports() == 1);
  CHECK(count_calls(node, "images tag") == 1);
  CHECK(count_calls(node, "content label") > 0);
  Run again = node.install(archive);
  CHECK(again.err.find("applying") == std::string::npos);
}

TEST_CASE(
    "a missing image without an archive: a peer fetch with the mirror on, "
    "the archive asked for without it",
    "[e2e][image][containerd][mirror]") {
  REQUIRE_CONTAINERD();
  ImageNode node;
  SECTION("an agent with the mirror on: the kubelet fetches from a peer") {
    mirror_on(node, /*agent=*/true);
    Run r = run_gpunode(
        {"install", "--root", node.root, "--only", "image", "--json"},
        node.env());
    INFO(r.err);
    CHECK(r.exit_code == 0);
    const auto ev = image_event(r);
    CHECK(ev.value("code", "") == "image.from-peer");
    CHECK_THAT(ev.value("summary", ""),
               Catch::Contains("fetch it from a peer node"));
    REQUIRE(ev["warnings"].size() == 1);
    CHECK_THAT(ev["warnings"][0].get<std::string>(),
               Catch::Contains("ImagePullBackOff") &&
                   Catch::Contains("--image-archive"));
    CHECK(ev["facts"]["mirror"]["enabled"] == true);
    CHECK(ev["facts"]["mirror"]["embedded_registry"].is_null());
    CHECK(ev["facts"]["mirror"]["local_endpoint"] == true);
    CHECK(ev["facts"]["image"]["digest"].is_null());
    CHECK(node.row().empty());
  }
  SECTION("mirrors listed but the embedded registry off: as without it") {
    write_text(node.root + "/etc/rancher/k3s/registries.yaml",
               "mirrors:\n  nvcr.io:\n");
    Run r = run_gpunode(
        {"install", "--root", node.root, "--only", "image", "--json"},
        node.env());
    CHECK(r.exit_code == 1);
    CHECK(image_event(r).value("code", "") == "image.missing");
    CHECK(image_event(r)["facts"]["mirror"]["enabled"] == false);
  }
  SECTION("no mirror: blocked, asking for the archive, as today") {
    Run r = node.install("");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("gpunode install --image-archive"));
  }
}
