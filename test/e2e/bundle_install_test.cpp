// install --bundle, end to end: a bundle made with `gpunode bundle create`
// and signed, installed on a simulated node (real containerd, simulated
// k3s API) through the bundle's own install.sh; and refused when it does not
// verify, with nothing changed.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "containerd_fixture.hpp"
#include "gpunode/bundle.hpp"
#include "k3s_sim.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

using namespace gpunode::test;

using gpunode::test::flip_byte;

namespace {

struct BundleNode {
  TempDir dir;
  std::string root = dir.path() + "/node";
  std::string bundle = dir.path() + "/usb/gpunode-bundle";
  std::string key = dir.path() + "/publisher";
  Containerd& ctd = Containerd::shared();
  std::unique_ptr<K3sSim> sim;

  BundleNode() {
    ctd.reset();
    make_host_tree(root, "good-v3");
    SimOptions o;
    o.root = root;
    o.containerd_socket = ctd.socket();
    o.plugin_start_ms = 50;
    sim = std::make_unique<K3sSim>(o);
    const std::string archive = dir.path() + "/dp.tar";
    build_image(archive, ImageSpec{});
    REQUIRE(run_gpunode({"bundle", "keygen", "--out", key}).exit_code == 0);
    write_text(dir.path() + "/usb/.keep", "");
    Run made = run_gpunode({"bundle", "create", "--out", bundle,
                            "--image-archive", archive, "--sign-key",
                            key + ".key", "--created", "2026-11-29T00:00:00Z"});
    INFO(made.err);
    REQUIRE(made.exit_code == 0);
  }
  std::vector<std::string> env() const {
    const char* path = std::getenv("PATH");
    return {"PATH=" + ctd.bin_dir() + ":" + std::string(GPUNODE_TEST_SIM) +
                "/bin:" + (path ? path : "/usr/bin:/bin"),
            "GPUNODE_SIM_ROOT=" + root};
  }
  // The operator's command on the node: the stick's own install.sh.
  Run install_sh(std::vector<std::string> extra) {
    std::vector<std::string> argv{
        "sh", bundle + "/install.sh", "--root", root, "--timeout", "60s"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_with_sim(argv, env());
  }
};

}  // namespace

TEST_CASE(
    "preflight's bundle facts: the verified bundle's files, bytes and "
    "signer (docs/json-events.md)",
    "[e2e][bundle][facts]") {
  if (!containerd_available()) FAIL("needs root and Debian's containerd");
  BundleNode node;
  Run r = run_with_sim({std::string(GPUNODE_BINARY), "status", "--root",
                        node.root, "--bundle", node.bundle, "--trust-key",
                        node.key + ".pub", "--only", "preflight", "--json"},
                       node.env());
  INFO(r.err);
  nlohmann::json facts;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("stage", "") == "preflight") facts = j["facts"];
  }
  const nlohmann::json& b = facts["bundle"];
  CHECK(b["dir"] == node.bundle);
  CHECK(b["signer"] ==
        gpunode::bundle::key_fingerprint(read_text(node.key + ".pub")));
  // bundle.toml's own list: every file but bundle.toml and its signature.
  auto manifest = gpunode::bundle::parse_manifest(
      read_text(node.bundle + "/bundle.toml"), "bundle.toml");
  REQUIRE(manifest);
  std::uint64_t bytes = 0;
  for (const auto& f : manifest->files) bytes += f.size;
  CHECK(b["files"] == manifest->files.size());
  CHECK(b["bytes"] == bytes);
  CHECK(b["bytes"] > 0);
}

TEST_CASE(
    "install.sh from a signed bundle brings the node up and the bundle is not "
    "written",
    "[e2e][bundle][cluster]") {
  if (!containerd_available()) FAIL("needs root and Debian's containerd");
  BundleNode node;
  const auto bundle_before = snapshot_tree(node.bundle);
  Run r = node.install_sh({"--trust-key", node.key + ".pub"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("signed by"));
  CHECK(node.sim->object("/api/v1/nodes/gpu-node-1")["status"]["allocatable"]
                                                    ["nvidia.com/gpu"] == "1");
  CHECK(snapshot_tree(node.bundle) == bundle_before);
}

TEST_CASE(
    "a bundle that does not verify is refused with exit 4 before anything "
    "changes",
    "[e2e][bundle][cluster]") {
  if (!containerd_available()) FAIL("needs root and Debian's containerd");
  BundleNode node;
  SECTION("a flipped byte in the image") {
    flip_byte(node.bundle + "/images/k8s-device-plugin-v0.19.3.tar", 4096);
    Run r = node.install_sh({"--trust-key", node.key + ".pub"});
    INFO(r.err);
    CHECK(r.exit_code == 4);
    CHECK_THAT(r.err, Catch::Contains("images/k8s-device-plugin-v0.19.3.tar"));
  }
  SECTION("signed by a key nobody trusts") {
    REQUIRE(
        run_gpunode({"bundle", "keygen", "--out", node.dir.path() + "/other"})
            .exit_code == 0);
    Run r = node.install_sh({"--trust-key", node.dir.path() + "/other.pub"});
    INFO(r.err);
    CHECK(r.exit_code == 4);
  }
  SECTION("no trusted key and no explicit skip") {
    Run r = node.install_sh({});
    INFO(r.err);
    CHECK(r.exit_code == 4);
    CHECK_THAT(r.err, Catch::Contains("--insecure-skip-signature"));
  }
  CHECK(node.ctd.image_names().empty());
  CHECK(node.sim->stats()["writes"] == 0);
}

TEST_CASE(
    "a trusted key installed on the node is enough, and skipping the "
    "signature is then refused",
    "[e2e][bundle][cluster]") {
  if (!containerd_available()) FAIL("needs root and Debian's containerd");
  BundleNode node;
  const std::string installed =
      node.root + "/etc/gpunode/trusted-keys/publisher.pub";
  write_text(installed, read_text(node.key + ".pub"));
  Run r = node.install_sh({});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  // Issue 11: the stick's install.sh with the flag installed a bundle the
  // trusted key did not sign. The bundle, unsigned now, must be refused
  // before anything is read from it.
  REQUIRE(::unlink((node.bundle + "/bundle.toml.sig").c_str()) == 0);
  node.sim->reset_stats();
  Run skipped = node.install_sh({"--insecure-skip-signature"});
  INFO(skipped.err);
  CHECK(skipped.exit_code == 2);
  CHECK_THAT(skipped.err,
             Catch::Contains("--insecure-skip-signature: refused, a key is "
                             "trusted: " +
                             installed));
  CHECK(node.sim->stats()["writes"] == 0);
}
