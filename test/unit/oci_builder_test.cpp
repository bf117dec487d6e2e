// The test image builder and the private containerd fixture, proved against
// each other: what build_image writes must be what the real `ctr images
// import` accepts, under the names and digests BuiltImage reports. A first
// test (no containerd needed) checks the archives themselves.
#include "oci_builder.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "containerd_fixture.hpp"
#include "gpunode/archive_handles.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/system_host.hpp"
#include "test_support.hpp"

namespace gpunode::test {
namespace {

using Json = nlohmann::json;

const char* kRepo = "nvcr.io/nvidia/k8s-device-plugin";
const char* kRef = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";

struct Entry {
  unsigned type = 0;  // AE_IFREG, AE_IFDIR, AE_IFLNK
  std::string data;
  std::string symlink, hardlink;
};

// Every entry of a (possibly compressed) tar, in memory. Throws on a read
// error, with libarchive's message.
std::map<std::string, Entry> read_archive(const std::string& path) {
  ArchiveReadPtr a(archive_read_new());
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 65536) != ARCHIVE_OK)
    throw std::runtime_error(archive_error_string(a.get()));
  std::map<std::string, Entry> out;
  archive_entry* e = nullptr;
  int rc = ARCHIVE_OK;
  while ((rc = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK) {
    Entry& x = out[archive_entry_pathname(e)];
    x.type = archive_entry_filetype(e);
    if (const char* s = archive_entry_symlink(e)) x.symlink = s;
    if (const char* h = archive_entry_hardlink(e)) x.hardlink = h;
    char buf[65536];
    la_ssize_t n = 0;
    while ((n = archive_read_data(a.get(), buf, sizeof buf)) > 0)
      x.data.append(buf, static_cast<std::size_t>(n));
    if (n < 0) throw std::runtime_error(archive_error_string(a.get()));
  }
  if (rc != ARCHIVE_EOF)
    throw std::runtime_error(archive_error_string(a.get()));
  return out;
}

std::string blob_name(const std::string& digest) {
  return "blobs/sha256/" + digest.substr(std::string("sha256:").size());
}

// The line of `ctr images ls` (or `images check`) for `ref`, split on
// blanks: REF TYPE DIGEST ...
std::vector<std::string> image_row(Containerd& cd, const std::string& command,
                                   const std::string& ref) {
  ProcessResult r = cd.ctr({"images", command});
  REQUIRE(r.succeeded());
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    std::string w;
    while (fields >> w) f.push_back(w);
    if (!f.empty() && f[0] == ref) return f;
  }
  FAIL("no row for " << ref << " in `ctr images " << command << "`:\n"
                     << r.out);
  return {};
}

bool is_complete(const std::vector<std::string>& check_row) {
  // REF TYPE DIGEST STATUS ...: "complete (2/2)" vs "incomplete (1/2)".
  return check_row.size() > 3 && check_row[3] == "complete";
}

}  // namespace

TEST_CASE("oci builder: blobs match their names and every reference resolves",
          "[oci-builder]") {
  TempDir tmp;
  ImageSpec spec;
  spec.layer_bytes = 100000;
  const std::string path = tmp.path() + "/image.tar";
  const BuiltImage built = build_image(path, spec);
  CHECK(built.bytes == read_text(path).size());
  const auto entries = read_archive(path);

  CHECK(entries.at("oci-layout").data == R"({"imageLayoutVersion":"1.0.0"})");
  std::size_t blobs = 0;
  for (const auto& [name, e] : entries) {
    if (name.rfind("blobs/sha256/", 0) != 0 || e.type != AE_IFREG) continue;
    ++blobs;
    CHECK(sha256_hex(e.data) == name.substr(13));  // the streamed hash too
  }
  CHECK(blobs == 7);  // per platform: layer, config, manifest; nested index

  const Json index = Json::parse(entries.at("index.json").data);
  REQUIRE(index["manifests"].size() == 1);
  const Json& top = index["manifests"][0];
  CHECK(top["digest"] == built.index_digest);
  CHECK(top["mediaType"] == "application/vnd.oci.image.index.v1+json");
  CHECK(top["annotations"]["org.opencontainers.image.ref.name"] == kRef);
  const Json nested =
      Json::parse(entries.at(blob_name(built.index_digest)).data);
  REQUIRE(nested["manifests"].size() == 2);
  for (const Json& m : nested["manifests"]) {
    const std::string platform =
        m["platform"]["os"].get<std::string>() + "/" +
        m["platform"]["architecture"].get<std::string>();
    CHECK(built.manifest_digests.at(platform) == m["digest"]);
    const Json manifest = Json::parse(entries.at(blob_name(m["digest"])).data);
    const Json& layer = manifest["layers"][0];
    CHECK(layer["digest"] == built.layer_digests.at(platform));
    CHECK(layer["size"] == entries.at(blob_name(layer["digest"])).data.size());
    const Json config =
        Json::parse(entries.at(blob_name(manifest["config"]["digest"])).data);
    CHECK(config["architecture"] == m["platform"]["architecture"]);
    CHECK(config["rootfs"]["diff_ids"][0] == layer["digest"]);
    // The layer is itself a tar holding one file of layer_bytes.
    TempDir layer_dir;
    write_text(layer_dir.path() + "/layer.tar",
               entries.at(blob_name(layer["digest"])).data);
    const auto inner = read_archive(layer_dir.path() + "/layer.tar");
    REQUIRE(inner.size() == 1);
    CHECK(inner.begin()->second.data.size() == spec.layer_bytes);
  }

  SECTION("the same spec gives the same bytes; another seed other digests") {
    CHECK(read_text(build_image(tmp.path() + "/again.tar", spec).path) ==
          read_text(path));
    spec.seed = 2;
    CHECK(build_image(tmp.path() + "/other.tar", spec).index_digest !=
          built.index_digest);
  }
  SECTION("gzip and zstd wrap the very same tar") {
    for (Compression c : {Compression::kGzip, Compression::kZstd}) {
      const BuiltImage z = build_image(tmp.path() + "/image.tar.z", spec,
                                       ArchiveFormat::kOciLayout, c);
      CHECK(z.index_digest == built.index_digest);
      CHECK(read_archive(z.path).at("index.json").data ==
            entries.at("index.json").data);
    }
  }
  SECTION("damage is where it is said to be") {
    const std::string d = tmp.path() + "/damaged.tar";
    CHECK_THROWS(
        read_archive(build_image(d, spec, ArchiveFormat::kOciLayout,
                                 Compression::kNone, Damage::kTruncated)
                         .path));
    auto damaged = [&](Damage damage) {
      return read_archive(build_image(d, spec, ArchiveFormat::kOciLayout,
                                      Compression::kNone, damage)
                              .path);
    };
    const std::string layer0 = blob_name(built.layer_digests.at("linux/amd64"));
    CHECK(sha256_hex(damaged(Damage::kCorruptLayer).at(layer0).data) !=
          layer0.substr(13));
    CHECK(damaged(Damage::kMissingBlob).count(layer0) == 0);
    CHECK(damaged(Damage::kMissingIndex).count("index.json") == 0);
    CHECK(damaged(Damage::kPathTraversal).count("../evil") == 1);
    CHECK(damaged(Damage::kAbsolutePath).count("/etc/evil") == 1);
    CHECK(damaged(Damage::kSymlinkEntry).at("blobs/sha256/link").symlink ==
          "/etc/passwd");
    CHECK(
        damaged(Damage::kHardlinkEntry).at("blobs/sha256/hardlink").hardlink ==
        "/etc/passwd");
    CHECK_THROWS(read_archive(build_image(d, spec, ArchiveFormat::kOciLayout,
                                          Compression::kNone, Damage::kNotATar)
                                  .path));
    CHECK_THROWS_AS(build_image(d, spec, ArchiveFormat::kDockerArchive,
                                Compression::kNone, Damage::kSizeMismatch),
                    std::invalid_argument);
  }
}

TEST_CASE("oci builder: real ctr imports the archives it builds",
          "[oci-builder][containerd]") {
  if (!containerd_available()) FAIL("needs root and Debian's containerd");
  Containerd& cd = Containerd::shared();
  cd.reset();
  TempDir tmp;
  const std::string path = tmp.path() + "/image.tar";

  SECTION("a two-platform OCI image (nested index), index.json last") {
    const BuiltImage built = build_image(path, ImageSpec{});
    ProcessResult r = cd.ctr({"images", "import", "--base-name", kRepo, path});
    INFO(r.out << r.err);
    REQUIRE(r.succeeded());
    CHECK(cd.image_names() == std::vector<std::string>{kRef});
    const auto row = image_row(cd, "ls", kRef);
    CHECK(row.at(1) == "application/vnd.oci.image.index.v1+json");
    CHECK(row.at(2) == built.index_digest);
    CHECK(is_complete(image_row(cd, "check", kRef)));
    // Only the host's platform is imported (no --all-platforms); its layer
    // is in the content store under the digest the builder reported.
    const auto content = cd.content_digests();
    CHECK(content.count(built.index_digest) == 1);
    const std::string host =
        content.count(built.manifest_digests.at("linux/amd64")) ? "linux/amd64"
                                                                : "linux/arm64";
    CHECK(content.count(built.manifest_digests.at(host)) == 1);
    CHECK(content.count(built.layer_digests.at(host)) == 1);
  }
  SECTION("a single-manifest OCI image, index.json first") {
    ImageSpec spec;
    spec.platforms = {"linux/amd64"};
    spec.index_first = true;
    const BuiltImage built = build_image(path, spec);
    CHECK(built.index_digest == built.manifest_digests.at("linux/amd64"));
    ProcessResult r = cd.ctr({"images", "import", "--base-name", kRepo, path});
    INFO(r.out << r.err);
    REQUIRE(r.succeeded());
    const auto row = image_row(cd, "ls", kRef);
    CHECK(row.at(1) == "application/vnd.oci.image.manifest.v1+json");
    CHECK(row.at(2) == built.index_digest);
    CHECK(is_complete(image_row(cd, "check", kRef)));
  }
  SECTION("a tag-only ref.name takes its name from --base-name") {
    ImageSpec spec;
    spec.ref_name = "v0.19.3";
    const BuiltImage built = build_image(path, spec);
    ProcessResult r = cd.ctr({"images", "import", "--base-name", kRepo, path});
    INFO(r.out << r.err);
    REQUIRE(r.succeeded());
    CHECK(image_row(cd, "ls", kRef).at(2) == built.index_digest);
  }
  SECTION("a docker archive (legacy docker save layout)") {
    const BuiltImage built =
        build_image(path, ImageSpec{}, ArchiveFormat::kDockerArchive);
    ProcessResult r = cd.ctr({"images", "import", path});
    INFO(r.out << r.err);
    REQUIRE(r.succeeded());
    // containerd writes its own manifest for it; the config is ours.
    const auto row = image_row(cd, "ls", kRef);
    CHECK(row.at(1) == "application/vnd.docker.distribution.manifest.v2+json");
    CHECK(is_complete(image_row(cd, "check", kRef)));
    CHECK(cd.content_digests().count(built.index_digest) == 1);
  }

  cd.reset();
  CHECK(cd.image_names().empty());
  CHECK(cd.content_digests().empty());
}

TEST_CASE("containerd fixture: the k3s wrapper runs only `k3s ctr`",
          "[oci-builder][containerd]") {
  if (!containerd_available()) FAIL("needs root and Debian's containerd");
  Containerd& cd = Containerd::shared();
  cd.reset();
  TempDir tmp;
  const BuiltImage built = build_image(tmp.path() + "/i.tar", ImageSpec{});
  REQUIRE(cd.ctr({"images", "import", "--base-name", kRepo, built.path})
              .succeeded());
  auto runner = make_posix_process_runner();
  const std::string k3s = cd.bin_dir() + "/k3s";
  // Namespace k8s.io by default, as the real `k3s ctr`.
  ProcessResult ls =
      runner->run({k3s, "ctr", "images", "ls", "-q"}, std::chrono::seconds(60));
  CHECK(ls.succeeded());
  CHECK(ls.out == std::string(kRef) + "\n");
  ProcessResult other =
      runner->run({k3s, "ctr", "-n", "default", "images", "ls", "-q"},
                  std::chrono::seconds(60));
  CHECK(other.succeeded());
  CHECK(other.out.empty());
  ProcessResult server = runner->run({k3s, "server"}, std::chrono::seconds(60));
  CHECK(server.exit_code == 1);
  CHECK_THAT(server.err, Catch::Contains("only 'k3s ctr'"));
  cd.reset();
}

}  // namespace gpunode::test
