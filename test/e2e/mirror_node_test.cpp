// A whole node with k3s's embedded registry mirror on: install shapes the
// image for it (containerd/mirror_share.hpp) and uninstall takes the extra
// name away again, so that no pinned name keeps the content.
#include <catch2/catch.hpp>

#include "containerd_fixture.hpp"
#include "sim_gpu_node.hpp"
#include "test_support.hpp"

using namespace gpunode::test;

TEST_CASE(
    "mirror on: install adds the pinned digest reference, uninstall "
    "removes it with the image",
    "[e2e][mirror]") {
  REQUIRE_PARTS();
  SimGpuNode node;
  write_text(node.root + "/etc/rancher/k3s/registries.yaml",
             "mirrors:\n  nvcr.io:\n");
  // Beside the node-name the simulated tree's config.yaml holds.
  const std::string config = node.root + "/etc/rancher/k3s/config.yaml";
  write_text(config, read_text(config) + "embedded-registry: true\n");
  Run r = node.install();
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto names = node.ctd.image_names();
  REQUIRE(names.size() == 2);
  int by_digest = 0;
  for (const auto& n : names)
    by_digest += n.rfind("nvcr.io/nvidia/k8s-device-plugin@sha256:", 0) == 0;
  CHECK(by_digest == 1);
  // A converged rerun writes nothing: the same end state, no apply.
  const EndState before = end_state(node);
  Run again = node.install();
  CHECK(again.exit_code == 0);
  CHECK(again.err.find("applying") == std::string::npos);
  CHECK(end_state(node) == before);

  Run u = node.gpunode({"uninstall"});
  INFO(u.err);
  CHECK(u.exit_code == 0);
  CHECK(node.ctd.image_names().empty());
}
