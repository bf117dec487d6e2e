// The embedded registry mirror's state from a node's files
// (containerd/registry_mirror.hpp), and `ctr content ls` parsed.
#include "containerd/registry_mirror.hpp"

#include <catch2/catch.hpp>

#include "containerd/ctr_client.hpp"
#include "gpunode/system_host.hpp"
#include "test_support.hpp"

namespace gpunode {

TEST_CASE("mirror: an image name's registry and repository", "[mirror]") {
  auto n = split_image_name("nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  CHECK(n.registry == "nvcr.io");
  CHECK(n.repository == "nvidia/k8s-device-plugin");
  n = split_image_name("localhost:5000/dp@sha256:abc");
  CHECK(n.registry == "localhost:5000");
  CHECK(n.repository == "dp");
  n = split_image_name("nvidia/cuda:12");
  CHECK(n.registry == "docker.io");
  CHECK(n.repository == "nvidia/cuda");
  n = split_image_name("busybox");
  CHECK(n.registry == "docker.io");
  CHECK(n.repository == "library/busybox");
}

TEST_CASE(
    "mirror: on only with the registry mirrored and the embedded "
    "registry on",
    "[mirror]") {
  test::TempDir t;
  auto fs = make_rooted_file_system(t.path());
  const std::string ref = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";
  const std::string etc = t.path() + "/etc/rancher/k3s";
  CHECK_FALSE(read_registry_mirror(*fs, ref).enabled());
  test::write_text(etc + "/registries.yaml", "mirrors:\n  docker.io:\n");
  CHECK_FALSE(read_registry_mirror(*fs, ref).registry_mirrored);
  test::write_text(etc + "/registries.yaml", "mirrors:\n  nvcr.io:\n");
  RegistryMirror m = read_registry_mirror(*fs, ref);
  CHECK(m.registry_mirrored);
  CHECK_FALSE(m.enabled());
  test::write_text(etc + "/config.yaml", "embedded-registry: true\n");
  m = read_registry_mirror(*fs, ref);
  CHECK(m.enabled());
  CHECK(m.source == "/etc/rancher/k3s/config.yaml");
  // A later drop-in's key wins, as k3s merges them.
  test::write_text(etc + "/config.yaml.d/99-off.yaml",
                   "embedded-registry: false\n");
  m = read_registry_mirror(*fs, ref);
  CHECK_FALSE(m.enabled());
  CHECK(m.embedded_registry == false);
  CHECK(m.facts()["source"].is_null());
  // An agent: the hosts.toml k3s rendered names its local endpoint.
  test::write_text(t.path() +
                       "/var/lib/rancher/k3s/agent/etc/containerd/certs.d/"
                       "nvcr.io/hosts.toml",
                   "[host.\"https://127.0.0.1:6443/v2\"]\n");
  m = read_registry_mirror(*fs, ref);
  CHECK(m.local_endpoint);
  CHECK(m.enabled());
}

TEST_CASE("ctr: content ls rows with and without labels", "[mirror][ctr]") {
  const std::string out =
      "DIGEST\tSIZE\tAGE\tLABELS\n"
      "sha256:aa\t1.2kB\t2 minutes\tcontainerd.io/gc.ref.content.l.0=sha256:"
      "bb,containerd.io/distribution.source.nvcr.io=nvidia/dp\n"
      "sha256:bb\t10MB\tAbout a minute\t\n";
  auto blobs = CtrClient::parse_content_ls(out);
  REQUIRE(blobs.size() == 2);
  CHECK(blobs["sha256:aa"] ==
        std::vector<std::string>{"containerd.io/gc.ref.content.l.0=sha256:bb",
                                 "containerd.io/distribution.source.nvcr.io="
                                 "nvidia/dp"});
  CHECK(blobs["sha256:bb"].empty());
}

}  // namespace gpunode
