// Issue 11 (hardening), trust and the cluster, beyond the bad-input table:
// `bundle verify` and `status --bundle` refuse --insecure-skip-signature
// while a key is trusted; a kubeconfig readable by others is a warning (and
// a JSON warning event); status reports the cluster connection once, as the
// "cluster" layer, and ends naming what the cluster shows broken; and
// --replace-existing says what it leaves behind.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "oci_builder.hpp"
#include "sim_gpu_node.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

// A signed bundle and its publisher key under `tmp`.
std::string make_signed_bundle(const TempDir& tmp) {
  REQUIRE(run_gpunode({"bundle", "keygen", "--out", tmp.path() + "/publisher"})
              .exit_code == 0);
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  Run c = run_gpunode({"bundle", "create", "--out", tmp.path() + "/bundle",
                       "--image-archive", tmp.path() + "/plugin.tar",
                       "--sign-key", tmp.path() + "/publisher.key", "--created",
                       "2026-11-29T10:00:00Z"});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  return tmp.path() + "/bundle";
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1))
    ++n;
  return n;
}

std::vector<json> json_events(const std::string& out) {
  std::vector<json> events;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) events.push_back(json::parse(line));
  return events;
}

}  // namespace

TEST_CASE(
    "bundle verify refuses --insecure-skip-signature while any key is "
    "trusted, naming where the key came from",
    "[e2e][bundle]") {
  TempDir tmp;
  const std::string bundle = make_signed_bundle(tmp);
  const std::string pub = tmp.path() + "/publisher.pub";
  // Unsigned from here: the flag would have let it through.
  REQUIRE(::unlink((bundle + "/bundle.toml.sig").c_str()) == 0);
  const auto before = snapshot_tree(bundle);

  SECTION("--trust-key") {
    Run r = run_gpunode({"bundle", "verify", bundle, "--trust-key", pub,
                         "--insecure-skip-signature"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--insecure-skip-signature: refused, a "
                                      "key is trusted: --trust-key (" +
                                      pub + ")"));
    CHECK_THAT(r.err, Catch::Contains("fix: drop --insecure-skip-signature"));
  }
  SECTION("GPUNODE_TRUST_KEYS") {
    Run r =
        run_gpunode({"bundle", "verify", bundle, "--insecure-skip-signature"},
                    {"GPUNODE_TRUST_KEYS=" + pub});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("a key is trusted: GPUNODE_TRUST_KEYS"));
  }
  SECTION("the trusted-keys directory under --root") {
    TempDir root;
    const std::string installed =
        root.path() + "/etc/gpunode/trusted-keys/publisher.pub";
    write_text(installed, read_text(pub));
    Run r = run_gpunode({"bundle", "verify", bundle, "--root", root.path(),
                         "--insecure-skip-signature"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("a key is trusted: " + installed));
  }
  SECTION("a key others may write is no anchor") {
    REQUIRE(::chmod(pub.c_str(), 0666) == 0);
    Run r = run_gpunode({"bundle", "verify", bundle, "--trust-key", pub});
    CHECK(r.exit_code == 5);
    CHECK_THAT(r.err, Catch::Contains("trusted key " + pub +
                                      " is not a trust anchor"));
    CHECK_THAT(r.err, Catch::Contains("fix: sudo chmod go-w " + pub));
  }
  CHECK(snapshot_tree(bundle) == before);
}

TEST_CASE("status --bundle refuses --insecure-skip-signature with a key",
          "[e2e][bundle][cluster]") {
  REQUIRE_PARTS();
  SimGpuNode node;
  TempDir tmp;
  const std::string bundle = make_signed_bundle(tmp);
  Run r = node.gpunode({"status", "--bundle", bundle, "--trust-key",
                        tmp.path() + "/publisher.pub",
                        "--insecure-skip-signature"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--insecure-skip-signature: refused"));
}

TEST_CASE(
    "a kubeconfig readable by others: a warning and a JSON warning event, "
    "once",
    "[e2e][cluster]") {
  REQUIRE_PARTS();
  SimGpuNode node;
  REQUIRE(node.install().exit_code == 0);
  const std::string kubeconfig = node.root + "/etc/rancher/k3s/k3s.yaml";
  REQUIRE(::chmod(kubeconfig.c_str(), 0644) == 0);
  Run r = node.gpunode({"status", "--json"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(count_of(r.err, "[WARN kubeconfig]") == 1);
  CHECK_THAT(r.err, Catch::Contains("readable by every local user"));
  CHECK_THAT(r.err, Catch::Contains("chmod 600 /etc/rancher/k3s/k3s.yaml"));
  int warnings = 0;
  for (const json& e : json_events(r.out)) {
    if (e["event"] == "warning" && e["layer"] == "kubeconfig") {
      ++warnings;
      CHECK_THAT(e["message"].get<std::string>(),
                 Catch::Contains("write-kubeconfig-mode"));
    }
  }
  CHECK(warnings == 1);
}

TEST_CASE(
    "status reports the cluster connection once, as the cluster layer, not "
    "as runtimeclass",
    "[e2e][cluster]") {
  REQUIRE_PARTS();
  SimGpuNode node;
  REQUIRE(node.install().exit_code == 0);
  SECTION("no kubeconfig") {
    REQUIRE(::unlink((node.root + "/etc/rancher/k3s/k3s.yaml").c_str()) == 0);
    Run r = node.gpunode({"status", "--json"});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(count_of(r.err, "[ERROR cluster]") == 1);
    // Said once above the last line (which names it too), not per stage.
    const std::string above = r.err.substr(0, r.err.rfind(last_line(r.err)));
    CHECK(count_of(above, "k3s.yaml does not exist") == 1);
    CHECK(r.err.find("[ERROR runtimeclass]") == std::string::npos);
    CHECK_THAT(last_line(r.err),
               Catch::Contains("cluster: /etc/rancher/k3s/k3s.yaml does not "
                               "exist"));
    // JSON: the error event names the cluster layer; the result's summary
    // says the same as the human line.
    bool error_event = false;
    for (const json& e : json_events(r.out)) {
      if (e["event"] == "error" && e["layer"] == "cluster") error_event = true;
      if (e["event"] == "result")
        CHECK_THAT(e["summary"].get<std::string>(),
                   Catch::StartsWith("cluster: "));
    }
    CHECK(error_event);
  }
  SECTION("API server not answering (install stops at it)") {
    node.sim->faults({{"refuse_ms", 60000}});
    Run r = node.install({"--timeout", "5s"});
    node.sim->faults({{"refuse_ms", 0}});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(count_of(r.err, "[ERROR cluster]") == 1);
    CHECK(r.err.find("[ERROR runtimeclass]") == std::string::npos);
    // Preflight does not block on an API server that does not answer.
    CHECK_THAT(r.err, Catch::Contains("[preflight]    ok"));
    CHECK_THAT(last_line(r.err), Catch::Contains("- cluster: "));
  }
}

TEST_CASE(
    "with --replace-existing, install says what it leaves: the Helm release "
    "and a stale resource on the node",
    "[e2e][cluster]") {
  REQUIRE_PARTS();
  SimGpuNode node;
  // Our time-slicing variant, renamed, first: the node then lists
  // nvidia.com/gpu.shared, which the default variant does not advertise.
  REQUIRE(node.install({"--variant", "time-slicing", "--rename-shared"})
              .exit_code == 0);
  const std::string other = node.dir.path() + "/nvdp.yaml";
  write_text(other, helm_device_plugin_yaml());
  REQUIRE(node.kubectl({"apply", "--server-side", "-f", other}).exit_code == 0);
  Run replaced = node.install({"--replace-existing"});
  INFO(replaced.err);
  CHECK(replaced.exit_code == 0);
  CHECK_THAT(replaced.err,
             Catch::Contains("--replace-existing deletes only DaemonSet "
                             "nvidia-device-plugin/nvdp-nvidia-device-plugin"));
  CHECK_THAT(replaced.err,
             Catch::Contains("helm -n nvidia-device-plugin uninstall nvdp"));
  CHECK_THAT(replaced.err,
             Catch::Contains("node gpu-node-1 lists nvidia.com/gpu.shared"));
  CHECK_THAT(replaced.err, Catch::Contains("kubectl patch node gpu-node-1 "
                                           "--subresource=status"));
  CHECK_THAT(replaced.err,
             Catch::Contains("/status/capacity/nvidia.com~1gpu.shared"));
  CHECK(node.allocatable() == "1");
}

TEST_CASE("bundle create refuses a registry CA others may write",
          "[e2e][bundle]") {
  // The CA decides whose image a signed bundle carries: an anchor too.
  TempDir tmp;
  const std::string ca = tmp.path() + "/ca.pem";
  write_text(ca, "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
             0666);
  const std::string out = tmp.path() + "/bundle";
  Run r = run_gpunode({"bundle", "create", "--out", out, "--pull",
                       "nvcr.io/nvidia/k8s-device-plugin:v0.19.3",
                       "--registry-ca", ca});
  INFO(r.err);
  CHECK(r.exit_code == 5);
  CHECK_THAT(r.err,
             Catch::Contains("--registry-ca " + ca + " is not a trust anchor"));
  CHECK_THAT(r.err, Catch::Contains("chmod go-w " + ca));
  CHECK_FALSE(std::filesystem::exists(out));
}
