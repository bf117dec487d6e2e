// preflight: k3s present, the bundle verified, and room for the images.
#include <catch2/catch.hpp>

#include "gpunode/image_archive.hpp"
#include "gpunode/images_lock.hpp"
#include "gpunode/system_host.hpp"
#include "oci_builder.hpp"
#include "stages/stages.hpp"
#include "test_support.hpp"

using namespace gpunode;

namespace {

// The real rooted file system, with a disk as full as the test says.
class SizedDisk : public FileSystem {
 public:
  SizedDisk(std::unique_ptr<FileSystem> fs, std::uint64_t free)
      : fs_(std::move(fs)), free_(free) {}
  std::string resolve(const std::string& p) const override {
    return fs_->resolve(p);
  }
  std::optional<FileInfo> stat(const std::string& p) const override {
    return fs_->stat(p);
  }
  Result<std::string> read_file(const std::string& p,
                                std::size_t max) const override {
    return fs_->read_file(p, max);
  }
  bool is_executable_file(const std::string& p) const override {
    return fs_->is_executable_file(p);
  }
  std::vector<std::string> list_dir(const std::string& p) const override {
    return fs_->list_dir(p);
  }
  Result<void> create_directories(const std::string& p) override {
    return fs_->create_directories(p);
  }
  Result<void> write_file_atomic(const std::string& p, const std::string& c,
                                 unsigned mode) override {
    return fs_->write_file_atomic(p, c, mode);
  }
  std::optional<std::uint64_t> free_bytes(const std::string&) const override {
    return free_;
  }

 private:
  std::unique_ptr<FileSystem> fs_;
  std::uint64_t free_;
};

// `damage` makes the archive (about 4 MiB: one 4 MiB layer) bad; `node_name`
// replaces the node-name in k3s's config.yaml.
Check preflight(std::uint64_t free, bool with_archive,
                test::Damage damage = test::Damage::kNone,
                const std::string& node_name = "") {
  test::TempDir dir;
  const std::string root = dir.path() + "/node";
  test::make_host_tree(root, "good-v3");
  if (!node_name.empty()) {
    test::write_text(root + "/etc/rancher/k3s/config.yaml",
                     "node-name: " + node_name + "\n");
  }
  const std::string archive = dir.path() + "/dp.tar";
  test::ImageSpec spec;
  spec.platforms = {host_platform()};
  spec.layer_bytes = 4 * 1024 * 1024;
  test::build_image(archive, spec, test::ArchiveFormat::kOciLayout,
                    test::Compression::kNone, damage);
  SizedDisk fs(make_rooted_file_system(root), free);
  auto proc = make_posix_process_runner();
  test::FakeClock clock;
  ComposedHost host(fs, *proc, clock, 0, "gpu-node-1");
  Options opts;
  opts.root = root;
  opts.image_ref = locked_device_plugin_image().ref;
  if (with_archive) opts.image_archive = archive;
  Context ctx(host, opts, clock.steady_now() + std::chrono::minutes(1));
  return make_preflight_stage()->check(ctx);
}

}  // namespace

TEST_CASE("preflight wants room for the image twice under containerd's root",
          "[preflight]") {
  Check low = preflight(6 * 1024 * 1024, true);  // 6 MiB free, 8 MiB needed
  CHECK(low.status == CheckStatus::kBlocked);
  CHECK(low.code == "preflight.disk");
  CHECK_THAT(low.summary, Catch::Contains("6 MiB free, about 8 MiB needed"));
  CHECK_THAT(low.fix, Catch::Contains("crictl rmi --prune"));
  CHECK(preflight(9 * 1024 * 1024, true).status == CheckStatus::kSatisfied);
  // Nothing to import: no disk wanted.
  CHECK(preflight(0, false).status == CheckStatus::kSatisfied);
}

TEST_CASE("the real file system reports free bytes for a path not created yet",
          "[preflight]") {
  test::TempDir dir;
  auto fs = make_rooted_file_system(dir.path());
  auto free = fs->free_bytes("/var/lib/rancher/k3s/agent/containerd");
  REQUIRE(free);
  CHECK(*free > 0);
}

TEST_CASE(
    "preflight refuses a bad --image-archive and a bad node name before any "
    "layer changes",
    "[preflight]") {
  // Both used to be found only by later stages (image, allocatable), after
  // runtimeclass had already changed the cluster.
  const std::uint64_t plenty = 1ULL << 40;
  Check corrupt = preflight(plenty, true, test::Damage::kCorruptLayer);
  CHECK(corrupt.status == CheckStatus::kBlocked);
  CHECK(corrupt.code == "preflight.image-archive");
  CHECK(corrupt.exit == ExitCode::kIntegrity);
  CHECK_THAT(corrupt.summary, Catch::Contains("is corrupt"));
  Check traversal = preflight(plenty, true, test::Damage::kPathTraversal);
  CHECK(traversal.exit == ExitCode::kUsage);

  Check node = preflight(plenty, false, test::Damage::kNone, "../x");
  CHECK(node.status == CheckStatus::kBlocked);
  CHECK(node.code == "preflight.node-name");
  CHECK(node.exit == ExitCode::kUsage);
  CHECK_THAT(node.summary,
             Catch::Contains("/etc/rancher/k3s/config.yaml: '../x' is not a "
                             "valid Kubernetes node name"));
}
