// `bundle create`: the layout, modes and bundle.toml it writes, that it is
// reproducible, that it refuses bad inputs leaving nothing behind, and that
// a signed bundle's signature verifies.
#include "gpunode/bundle_create.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "gpunode/bundle.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/utc_time.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

namespace gpunode::test {
namespace {

namespace fs = std::filesystem;
using bundle::CreateOptions;

const char* kPluginRef = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";
const char* kCudaRef = "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0";
const char* kCreated = "2026-01-31T12:00:00Z";

// Inputs in one scratch directory: the two archives and a stand-in for
// the gpunode binary.
struct Inputs {
  TempDir dir;
  BuiltImage plugin;
  BuiltImage cuda;
  std::string binary;
  Inputs() {
    plugin = build_image(dir.path() + "/plugin.tar", ImageSpec{});
    ImageSpec cuda_spec;
    cuda_spec.ref_name = kCudaRef;
    cuda_spec.seed = 7;
    cuda = build_image(dir.path() + "/cuda.tar", cuda_spec);
    binary = dir.path() + "/gpunode";
    write_text(binary, "#!/bin/true\nnot really gpunode\n", 0700);
  }
  CreateOptions options(const std::string& out) const {
    CreateOptions o;
    o.out = out;
    o.image_archives = {plugin.path, cuda.path};
    o.self_binary = binary;
    o.created = kCreated;
    o.min_driver = "535.0";
    return o;
  }
};

unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Names in `dir` (not recursive), to prove a refused create left nothing.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE("bundle create lays out a complete bundle", "[bundle]") {
  Inputs in;
  TempDir work;
  const std::string out = work.path() + "/gpunode-bundle";
  auto report = bundle::create_bundle(in.options(out));
  REQUIRE(report.ok());
  CHECK(report->out == out);
  CHECK_FALSE(report->signed_);

  // Given two archives, we should get exactly this tree, with fixed modes.
  const auto tree = snapshot_tree(out);
  std::vector<std::string> paths;
  for (const auto& [path, _] : tree) paths.push_back(path);
  CHECK(names_in(work.path()) == std::vector<std::string>{"gpunode-bundle"});
  for (const char* f : {"bin/gpunode", "images/k8s-device-plugin-v0.19.3.tar",
                        "images/cuda-sample-vectoradd-cuda12.5.0.tar",
                        "manifests/runtimeclass-nvidia.yml",
                        "manifests/nvidia-device-plugin.yml",
                        "manifests/nvidia-device-plugin-timeSlicing.yml",
                        "install.sh", "bundle.toml"}) {
    INFO(f);
    CHECK(fs::is_regular_file(out + "/" + f));
  }
  CHECK_FALSE(fs::exists(out + "/bundle.toml.sig"));
  CHECK(mode_of(out) == 0755);
  CHECK(mode_of(out + "/images") == 0755);
  CHECK(mode_of(out + "/bin/gpunode") == 0755);
  CHECK(mode_of(out + "/install.sh") == 0755);
  CHECK(mode_of(out + "/bundle.toml") == 0644);
  CHECK(mode_of(out + "/images/k8s-device-plugin-v0.19.3.tar") == 0644);
  CHECK(mode_of(out + "/manifests/nvidia-device-plugin.yml") == 0644);

  // Copies are byte for byte.
  CHECK(read_text(out + "/images/k8s-device-plugin-v0.19.3.tar") ==
        read_text(in.plugin.path));
  CHECK(read_text(out + "/bin/gpunode") == read_text(in.binary));
  CHECK(read_text(out + "/install.sh") ==
        "#!/bin/sh\n# gpunode offline bundle: installs from this directory; "
        "safe to rerun.\nd=$(dirname -- \"$0\")\ncase \"$d\" in -*) "
        "d=\"./$d\" ;; esac\nexec \"$d/bin/gpunode\" install --bundle "
        "\"$d\" \"$@\"\n");
  CHECK(read_text(out + "/manifests/runtimeclass-nvidia.yml")
            .find("RuntimeClass") != std::string::npos);

  // Every mtime is the creation time.
  struct stat st {};
  REQUIRE(::stat((out + "/images").c_str(), &st) == 0);
  CHECK(iso8601_utc(std::chrono::system_clock::from_time_t(st.st_mtime)) ==
        kCreated);
  REQUIRE(::stat((out + "/bundle.toml").c_str(), &st) == 0);
  CHECK(iso8601_utc(std::chrono::system_clock::from_time_t(st.st_mtime)) ==
        kCreated);

  // bundle.toml says what is there.
  auto m = bundle::parse_manifest(read_text(out + "/bundle.toml"),
                                  out + "/bundle.toml");
  REQUIRE(m.ok());
  CHECK(m->format_version == bundle::kFormatVersion);
  CHECK(m->created == kCreated);
  CHECK(m->min_driver == "535.0");
  CHECK(m->gpunode_version == GPUNODE_VERSION);
  CHECK(m->chunk_bytes == bundle::kChunkBytes);
  REQUIRE(m->images.size() == 2);
  const auto& cuda = m->images[0];
  const auto& plugin = m->images[1];
  CHECK(cuda.name == "cuda-sample");
  CHECK(cuda.ref == kCudaRef);
  CHECK(cuda.digest == in.cuda.index_digest);
  CHECK(cuda.file == "images/cuda-sample-vectoradd-cuda12.5.0.tar");
  CHECK(plugin.name == "device-plugin");
  CHECK(plugin.ref == kPluginRef);
  CHECK(plugin.digest == in.plugin.index_digest);
  CHECK(plugin.platforms ==
        std::vector<std::string>{"linux/amd64", "linux/arm64"});
  CHECK(plugin.file == "images/k8s-device-plugin-v0.19.3.tar");
  REQUIRE(m->files.size() == 7);
  for (const auto& f : m->files) {
    INFO(f.path);
    const std::string data = read_text(out + "/" + f.path);
    CHECK(f.size == data.size());
    CHECK(f.sha256 == sha256_hex(data));
    // Small files are one chunk, whose hash is the file's.
    REQUIRE(f.chunks.size() == 1);
    CHECK(f.chunks[0] == f.sha256);
  }
  CHECK(std::is_sorted(
      m->files.begin(), m->files.end(),
      [](const auto& a, const auto& b) { return a.path < b.path; }));
  CHECK(m->files[0].path == "bin/gpunode");
}

TEST_CASE("bundle create is reproducible", "[bundle]") {
  Inputs in;
  TempDir work;
  // Given the same inputs and the same created time, we should get
  // byte-identical trees.
  REQUIRE(bundle::create_bundle(in.options(work.path() + "/a")).ok());
  REQUIRE(bundle::create_bundle(in.options(work.path() + "/b")).ok());
  CHECK(snapshot_tree(work.path() + "/a") == snapshot_tree(work.path() + "/b"));

  SECTION("SOURCE_DATE_EPOCH fixes the time when --created is not given") {
    ScopedEnv env;
    env.set("SOURCE_DATE_EPOCH", "1769860800");  // 2026-01-31T12:00:00Z
    auto o = in.options(work.path() + "/c");
    o.created.clear();
    REQUIRE(bundle::create_bundle(o).ok());
    CHECK(snapshot_tree(work.path() + "/a") ==
          snapshot_tree(work.path() + "/c"));
  }
  SECTION("a different time gives a different bundle.toml") {
    auto o = in.options(work.path() + "/d");
    o.created = "2026-02-01T00:00:00Z";
    REQUIRE(bundle::create_bundle(o).ok());
    CHECK(read_text(work.path() + "/a/bundle.toml") !=
          read_text(work.path() + "/d/bundle.toml"));
  }
}

TEST_CASE("bundle create resolves the creation time", "[bundle]") {
  ScopedEnv env;
  env.unset("SOURCE_DATE_EPOCH");
  CHECK(*bundle::resolve_created(kCreated) == kCreated);
  for (const char* bad : {"2026-01-31", "2026-02-30T00:00:00Z",
                          "2026-01-31T12:00:00+01:00", "yesterday"}) {
    INFO(bad);
    auto r = bundle::resolve_created(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().exit == ExitCode::kUsage);
  }
  env.set("SOURCE_DATE_EPOCH", "0");
  CHECK(*bundle::resolve_created("") == "1970-01-01T00:00:00Z");
  env.set("SOURCE_DATE_EPOCH", "soon");
  CHECK(bundle::resolve_created("").error().exit == ExitCode::kUsage);
  env.unset("SOURCE_DATE_EPOCH");
  CHECK(bundle::resolve_created("")->size() == 20);
}

TEST_CASE("bundle create names image files after the ref", "[bundle]") {
  CHECK(bundle::image_file_name(kPluginRef) == "k8s-device-plugin-v0.19.3.tar");
  CHECK(bundle::image_file_name(kCudaRef) ==
        "cuda-sample-vectoradd-cuda12.5.0.tar");
  CHECK(bundle::image_file_name("registry:5000/a/b@sha256:0123456789abcdef") ==
        "b-0123456789ab.tar");
  CHECK(bundle::image_file_name("../..") == "image.tar");
}

TEST_CASE("bundle create accepts an empty --out directory", "[bundle]") {
  Inputs in;
  TempDir work;
  const std::string out = work.path() + "/empty";
  fs::create_directory(out);
  REQUIRE(bundle::create_bundle(in.options(out + "/")).ok());
  CHECK(fs::is_regular_file(out + "/bundle.toml"));
  CHECK(names_in(work.path()) == std::vector<std::string>{"empty"});
}

TEST_CASE("bundle create records only the platforms an archive has",
          "[bundle]") {
  TempDir work;
  ImageSpec spec;
  spec.platforms = {"linux/amd64"};
  build_image(work.path() + "/plugin.tar", spec);
  write_text(work.path() + "/gpunode", "bin", 0755);
  CreateOptions o;
  o.out = work.path() + "/out";
  o.image_archives = {work.path() + "/plugin.tar"};
  o.self_binary = work.path() + "/gpunode";
  o.created = kCreated;
  auto r = bundle::create_bundle(o);
  REQUIRE(r.ok());
  REQUIRE(r->manifest.images.size() == 1);
  CHECK(r->manifest.images[0].platforms ==
        std::vector<std::string>{"linux/amd64"});

  // Given an archive for none of the wanted platforms, we should refuse it.
  o.out = work.path() + "/out2";
  o.platforms = {"linux/arm64"};
  auto refused = bundle::create_bundle(o);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().exit == ExitCode::kUsage);
  CHECK_FALSE(fs::exists(o.out));
}

TEST_CASE("bundle create refuses bad inputs and leaves nothing behind",
          "[bundle]") {
  Inputs in;
  TempDir work;
  const std::string out = work.path() + "/gpunode-bundle";
  auto o = in.options(out);
  ExitCode want = ExitCode::kUsage;
  std::string mentions;

  SECTION("a compressed archive") {
    o.image_archives = {build_image(in.dir.path() + "/plugin.tar.gz",
                                    ImageSpec{}, ArchiveFormat::kOciLayout,
                                    Compression::kGzip)
                            .path};
    mentions = "decompress it first";
  }
  SECTION("a damaged archive") {
    ImageSpec spec;
    spec.ref_name = kCudaRef;
    o.image_archives.push_back(
        build_image(in.dir.path() + "/bad.tar", spec, ArchiveFormat::kOciLayout,
                    Compression::kNone, Damage::kCorruptLayer)
            .path);
    o.image_archives.erase(o.image_archives.begin() + 1);
    want = ExitCode::kIntegrity;
    mentions = "bad.tar";
  }
  SECTION("an unknown image") {
    ImageSpec spec;
    spec.ref_name = "docker.io/library/busybox:1.36";
    o.image_archives = {build_image(in.dir.path() + "/busybox.tar", spec).path};
    mentions = "busybox";
  }
  SECTION("the same image twice") {
    o.image_archives = {in.plugin.path, in.plugin.path};
    mentions = kPluginRef;
  }
  SECTION("a non-empty --out") {
    fs::create_directory(out);
    write_text(out + "/keep", "mine");
    mentions = out;
  }
  SECTION("--out in a directory that does not exist") {
    o.out = work.path() + "/missing/gpunode-bundle";
    mentions = "does not exist";
  }
  SECTION("--out is a file") {
    write_text(out, "mine");
    mentions = out;
  }
  const auto before = names_in(work.path());
  auto r = bundle::create_bundle(o);
  REQUIRE_FALSE(r.ok());
  INFO(r.error().message);
  CHECK(r.error().exit == want);
  CHECK(r.error().message.find(mentions) != std::string::npos);
  // No bundle and no partial directory; what was there is untouched.
  CHECK(names_in(work.path()) == before);
  if (fs::is_directory(out))
    CHECK(names_in(out) == std::vector<std::string>{"keep"});
}

TEST_CASE("bundle create signs bundle.toml", "[bundle]") {
  Inputs in;
  TempDir work;
  auto keys = bundle::generate_keypair();
  REQUIRE(keys.ok());
  auto o = in.options(work.path() + "/signed");
  o.sign_key_pem = keys->private_pem;
  auto r = bundle::create_bundle(o);
  REQUIRE(r.ok());
  CHECK(r->signed_);
  const std::string toml = read_text(o.out + "/bundle.toml");
  const std::string sig = read_text(o.out + "/bundle.toml.sig");
  CHECK(mode_of(o.out + "/bundle.toml.sig") == 0644);
  auto valid = bundle::signature_valid(keys->public_pem, toml, sig);
  REQUIRE(valid.ok());
  CHECK(*valid);
  // The signature is not listed in the manifest it signs.
  for (const auto& f : r->manifest.files) CHECK(f.path != "bundle.toml.sig");

  // A refused key leaves nothing behind.
  o.out = work.path() + "/badkey";
  o.sign_key_pem = "not a key";
  auto refused = bundle::create_bundle(o);
  REQUIRE_FALSE(refused.ok());
  CHECK_FALSE(fs::exists(o.out));
  CHECK(names_in(work.path()) == std::vector<std::string>{"signed"});
}

}  // namespace
}  // namespace gpunode::test

namespace gpunode::test {
namespace {

TEST_CASE("a created bundle verifies", "[bundle]") {
  Inputs in;
  TempDir work;
  auto keys = bundle::generate_keypair();
  REQUIRE(keys.ok());
  auto o = in.options(work.path() + "/b");
  o.sign_key_pem = keys->private_pem;
  REQUIRE(bundle::create_bundle(o).ok());
  bundle::VerifyOptions v;
  v.trust_keys = {keys->public_pem};
  auto report = bundle::verify_bundle(o.out, v);
  INFO((report.ok() ? "" : report.error().message));
  REQUIRE(report.ok());
  CHECK(report->signed_by_trusted_key);
  CHECK(report->manifest.images.size() == 2);
}

}  // namespace
}  // namespace gpunode::test
