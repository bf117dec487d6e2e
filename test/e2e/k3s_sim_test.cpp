// The simulated k3s node checked against the real client: kubectl v1.32
// talks to it over HTTPS with k3s's kubeconfig, applies the platform's
// manifests server-side, and sees the device plugin advertise GPUs only
// when the real preconditions hold. If kubectl can drive it like k3s, the
// installer's cluster tests mean something.
#include "k3s_sim.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "containerd_fixture.hpp"
#include "test_support.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

const std::string kNodePath = "/api/v1/nodes/gpu-node-1";
const std::string kDsPath =
    "/apis/apps/v1/namespaces/kube-system/daemonsets/"
    "nvidia-device-plugin-daemonset";
const std::string kRcPath = "/apis/node.k8s.io/v1/runtimeclasses/nvidia";
const std::string kCmPath =
    "/api/v1/namespaces/kube-system/configmaps/nvidia-device-plugin-config";

std::string manifest(const std::string& name) {
  return std::string(GPUNODE_TEST_SIM) + "/../../manifests/" + name;
}

std::string replaced(std::string text, const std::string& from,
                     const std::string& to) {
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// Polls `done` every 50 ms until it holds or `limit` passes.
bool eventually(const std::function<bool()>& done,
                std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// The simulator's options for a node whose kubelet sees the shared real
// containerd, emptied: every image an air-gapped node lacks.
SimOptions with_empty_containerd() {
  if (!containerd_available()) FAIL("needs root and Debian's containerd");
  Containerd& ctd = Containerd::shared();
  ctd.reset();
  SimOptions options;
  options.containerd_socket = ctd.socket();
  return options;
}

// A host tree (host-tree.sh scenario) with the simulator running on it.
struct SimNode {
  TempDir dir;
  std::string root = dir.path() + "/node";
  std::unique_ptr<K3sSim> sim;

  explicit SimNode(const std::string& scenario = "good-v3",
                   SimOptions options = {}) {
    make_host_tree(root, scenario);
    options.root = root;
    sim = std::make_unique<K3sSim>(options);
    // The platform's manifests select GPU nodes (nvidia.com/gpu.present=true,
    // which gpunode's labels stage sets): this node is one.
    ApiResponse labelled =
        sim->api("PATCH", "/api/v1/nodes/gpu-node-1",
                 R"({"metadata":{"labels":{"nvidia.com/gpu.present":"true"}}})",
                 "application/merge-patch+json");
    REQUIRE(labelled.status == 200);
  }

  // Real kubectl, with its discovery cache inside this test's temp dir.
  Run kubectl(const std::vector<std::string>& args,
              const std::string& kubeconfig = "") {
    if (::access("/usr/bin/kubectl", X_OK) != 0)
      FAIL("these tests drive the real kubectl, /usr/bin/kubectl: missing");
    std::vector<std::string> argv{
        "/usr/bin/kubectl",
        "--kubeconfig",
        kubeconfig.empty() ? sim->kubeconfig() : kubeconfig,
        "--cache-dir",
        dir.path() + "/kube-cache",
        "--request-timeout=20s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_with_sim(argv);
  }

  Run apply(const std::vector<std::string>& files) {
    std::vector<std::string> args{"apply", "--server-side"};
    for (const auto& f : files) {
      args.push_back("-f");
      args.push_back(f);
    }
    return kubectl(args);
  }

  // A manifest from manifests/ with one text replacement, as a file.
  std::string variant(const std::string& name, const std::string& from,
                      const std::string& to) {
    const std::string path =
        dir.path() + "/" + std::to_string(++variants_) + "-" + name;
    write_text(path, replaced(read_text(manifest(name)), from, to));
    return path;
  }

  // What kubectl reads as the node's allocatable `resource` ("" = absent).
  std::string allocatable(const std::string& resource = "nvidia.com/gpu") {
    std::string escaped;
    for (char c : resource)
      escaped += c == '.' ? std::string("\\.") : std::string(1, c);
    Run r = kubectl({"get", "node", "gpu-node-1", "-o",
                     "jsonpath={.status.allocatable." + escaped + "}"});
    return r.exit_code == 0 ? r.out : "kubectl failed: " + r.err;
  }

  bool allocatable_becomes(const std::string& value,
                           const std::string& resource = "nvidia.com/gpu") {
    return eventually([&] { return allocatable(resource) == value; });
  }

  json plugin_pod() {
    json pods =
        json::parse(kubectl({"get", "pods", "-n", "kube-system", "-l",
                             "name=nvidia-device-plugin-ds", "-o", "json"})
                        .out);
    return pods["items"].empty() ? json() : pods["items"][0];
  }

  std::string events(const std::string& ns = "kube-system") {
    return kubectl({"get", "events", "-n", ns}).out;
  }

 private:
  int variants_ = 0;
};

const char* kSmokePod =
    "apiVersion: v1\n"
    "kind: Pod\n"
    "metadata:\n"
    "  name: gpu-smoke\n"
    "  namespace: default\n"
    "spec:\n"
    "  restartPolicy: Never\n"
    "  runtimeClassName: nvidia\n"
    "  containers:\n"
    "  - name: cuda\n"
    "    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0\n"
    "    resources:\n"
    "      limits:\n"
    "        nvidia.com/gpu: 1\n";

}  // namespace

TEST_CASE("sim: kubectl reads the node, DaemonSets and RuntimeClasses",
          "[sim]") {
  SimNode node;
  Run nodes = node.kubectl({"get", "nodes"});
  INFO(nodes.err << node.sim->log_tail());
  REQUIRE(nodes.exit_code == 0);
  CHECK_THAT(nodes.out, Catch::Contains("gpu-node-1") &&
                            Catch::Contains("Ready") &&
                            Catch::Contains("control-plane") &&
                            Catch::Contains("v1.36.2+k3s1"));

  json node_json = json::parse(
      node.kubectl({"get", "node", "gpu-node-1", "-o", "json"}).out);
  CHECK(node_json["status"]["allocatable"]["cpu"] == "8");
  CHECK(node_json["status"]["allocatable"]["memory"] == "32Gi");
  CHECK(node_json["status"]["nodeInfo"]["containerRuntimeVersion"] ==
        "containerd://2.1.5-k3s1");
  CHECK(node_json["metadata"]["labels"]["kubernetes.io/hostname"] ==
        "gpu-node-1");

  Run version = node.kubectl({"version", "-o", "json"});
  REQUIRE(version.exit_code == 0);
  CHECK(json::parse(version.out)["serverVersion"]["gitVersion"] ==
        "v1.36.2+k3s1");

  Run ds = node.kubectl({"get", "ds", "-A"});
  CHECK(ds.exit_code == 0);
  CHECK_THAT(ds.err, Catch::Contains("No resources found"));
  Run no_rc = node.kubectl({"get", "runtimeclass"});
  CHECK(no_rc.exit_code == 0);
  CHECK_THAT(no_rc.err, Catch::Contains("No resources found"));

  Run applied = node.apply({manifest("runtimeclass-nvidia.yml")});
  INFO(applied.err);
  REQUIRE(applied.exit_code == 0);
  CHECK_THAT(
      applied.out,
      Catch::Contains("runtimeclass.node.k8s.io/nvidia serverside-applied"));
  Run rc = node.kubectl({"get", "runtimeclass"});
  CHECK_THAT(rc.out, Catch::Contains("HANDLER") && Catch::Contains("nvidia"));
  Run namespaces = node.kubectl({"get", "ns"});
  CHECK_THAT(namespaces.out,
             Catch::Contains("kube-system") && Catch::Contains("Active"));
}

TEST_CASE("sim: kubectl also works with legacy discovery only", "[sim]") {
  // kubectl 1.32 asks for aggregated discovery (apidiscovery.k8s.io/v2)
  // first; a server that answers plain JSON must work as well.
  SimNode node;
  node.sim->faults({{"aggregated_discovery", false}});
  REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                      manifest("nvidia-device-plugin.yml")})
              .exit_code == 0);
  Run ds = node.kubectl({"get", "ds", "-A"});
  CHECK(ds.exit_code == 0);
  CHECK_THAT(ds.out, Catch::Contains("nvidia-device-plugin-daemonset"));
  Run resources = node.kubectl({"api-resources"});
  CHECK_THAT(resources.out, Catch::Contains("runtimeclasses") &&
                                Catch::Contains("ds ") &&
                                Catch::Contains("apps/v1"));
}

TEST_CASE("sim: a repeated server-side apply is a no-op", "[sim]") {
  SimNode node;
  REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                      manifest("nvidia-device-plugin-timeSlicing.yml")})
              .exit_code == 0);
  const json rc = node.sim->object(kRcPath);
  const json cm = node.sim->object(kCmPath);
  const json ds = node.sim->object(kDsPath);
  CHECK(ds["metadata"]["generation"] == 1);
  // The server added its defaults, as the real one does.
  CHECK(ds["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] ==
        "IfNotPresent");
  CHECK(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1);

  node.sim->reset_stats();
  Run again = node.apply({manifest("runtimeclass-nvidia.yml"),
                          manifest("nvidia-device-plugin-timeSlicing.yml")});
  REQUIRE(again.exit_code == 0);
  CHECK(node.sim->object(kRcPath)["metadata"]["resourceVersion"] ==
        rc["metadata"]["resourceVersion"]);
  CHECK(node.sim->object(kCmPath)["metadata"]["resourceVersion"] ==
        cm["metadata"]["resourceVersion"]);
  CHECK(node.sim->object(kDsPath)["metadata"]["generation"] == 1);
  const json stats = node.sim->stats();
  CHECK(stats["by_verb"]["patch"] == 3);  // counted although nothing changed
  CHECK(stats["writes"] == 3);
}

TEST_CASE("sim: errors are kube-apiserver's Status bodies", "[sim]") {
  SimNode node;
  K3sSim& sim = *node.sim;

  ApiResponse missing = sim.api("GET", kRcPath);
  CHECK(missing.status == 404);
  CHECK(json::parse(missing.body) ==
        json::parse(R"({"kind":"Status","apiVersion":"v1","metadata":{},
          "status":"Failure",
          "message":"runtimeclasses.node.k8s.io \"nvidia\" not found",
          "reason":"NotFound","details":{"name":"nvidia",
          "group":"node.k8s.io","kind":"runtimeclasses"},"code":404})"));

  ApiResponse unknown = sim.api("GET", "/apis/example.com/v1/widgets");
  CHECK(unknown.status == 404);
  CHECK(json::parse(unknown.body)["reason"] == "NotFound");

  const std::string rc =
      "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n"
      "  name: nvidia\nhandler: nvidia\n";
  const std::string apply = "application/apply-patch+yaml";
  ApiResponse no_manager = sim.api("PATCH", kRcPath, rc, apply);
  CHECK(no_manager.status == 422);
  CHECK_THAT(json::parse(no_manager.body)["message"].get<std::string>(),
             Catch::Contains("fieldManager: Required value"));

  ApiResponse created =
      sim.api("PATCH", kRcPath + "?fieldManager=gpunode&force=true", rc, apply);
  CHECK(created.status == 201);
  ApiResponse same =
      sim.api("PATCH", kRcPath + "?fieldManager=gpunode&force=true", rc, apply);
  CHECK(same.status == 200);
  CHECK(json::parse(same.body)["metadata"]["resourceVersion"] ==
        json::parse(created.body)["metadata"]["resourceVersion"]);

  const std::string other = replaced(rc, "handler: nvidia", "handler: other");
  ApiResponse immutable = sim.api(
      "PATCH", kRcPath + "?fieldManager=gpunode&force=true", other, apply);
  CHECK(immutable.status == 422);
  const json invalid = json::parse(immutable.body);
  CHECK(invalid["reason"] == "Invalid");
  CHECK(invalid["message"] ==
        "RuntimeClass.node.k8s.io \"nvidia\" is invalid: handler: Invalid "
        "value: \"other\": field is immutable");
  CHECK(invalid["details"]["kind"] == "RuntimeClass");
  CHECK(invalid["details"]["causes"][0]["field"] == "handler");
  CHECK(invalid["details"]["causes"][0]["reason"] == "FieldValueInvalid");

  // Another manager changing the field without force: a conflict first.
  ApiResponse conflict =
      sim.api("PATCH", kRcPath + "?fieldManager=someone", other, apply);
  CHECK(conflict.status == 409);
  CHECK(json::parse(conflict.body)["message"] ==
        "Apply failed with 1 conflict: conflict with \"gpunode\": .handler");

  ApiResponse wrong_name = sim.api(
      "PATCH", "/apis/node.k8s.io/v1/runtimeclasses/other?fieldManager=x", rc,
      apply);
  CHECK(wrong_name.status == 400);
  CHECK(json::parse(wrong_name.body)["message"] ==
        "the name of the object (nvidia) does not match the name on the URL "
        "(other)");
  ApiResponse wrong_kind =
      sim.api("PATCH", kRcPath + "?fieldManager=x",
              replaced(rc, "node.k8s.io/v1", "node.k8s.io/v1beta1"), apply);
  CHECK(wrong_kind.status == 400);

  ApiResponse text = sim.api("PATCH", kRcPath, "handler: x", "text/plain");
  CHECK(text.status == 415);
  CHECK(json::parse(text.body)["reason"] == "UnsupportedMediaType");

  // kubectl renders those Status bodies as it does for k3s.
  write_text(node.dir.path() + "/other.yml", other);
  Run refused = node.kubectl({"apply", "--server-side", "--force-conflicts",
                              "-f", node.dir.path() + "/other.yml"});
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err,
             Catch::Contains("The RuntimeClass \"nvidia\" is invalid: "
                             "handler: Invalid value: \"other\": field is "
                             "immutable"));
  Run absent = node.kubectl({"get", "pod", "nope"});
  CHECK(absent.exit_code == 1);
  CHECK_THAT(absent.err,
             Catch::Contains("Error from server (NotFound): pods \"nope\" not "
                             "found"));
}

TEST_CASE("sim: client certificates are checked like kube-apiserver does",
          "[sim]") {
  SimNode node;
  const json unauthorized = json::parse(
      R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
          "message":"Unauthorized","reason":"Unauthorized","code":401})");
  ApiResponse anonymous =
      node.sim->api("GET", "/api/v1/nodes", "", "", ClientCert::kNone);
  CHECK(anonymous.status == 401);
  CHECK(json::parse(anonymous.body) == unauthorized);
  ApiResponse expired =
      node.sim->api("GET", "/api/v1/nodes", "", "", ClientCert::kExpired);
  CHECK(expired.status == 401);
  CHECK(json::parse(expired.body) == unauthorized);

  Run wrong_ca =
      node.kubectl({"get", "nodes"}, node.sim->kubeconfig_with_wrong_ca());
  CHECK(wrong_ca.exit_code != 0);
  CHECK_THAT(wrong_ca.err,
             Catch::Contains("certificate signed by unknown authority"));
  Run expired_cert =
      node.kubectl({"get", "nodes"}, node.sim->kubeconfig_with_expired_cert());
  CHECK(expired_cert.exit_code != 0);
  // kubectl's wording for a 401 during discovery.
  CHECK_THAT(expired_cert.err,
             Catch::Contains("You must be logged in to the server"));

  // The admin kubeconfig is where k3s puts it, readable by root only.
  const std::string installed = node.root + "/etc/rancher/k3s/k3s.yaml";
  CHECK(read_text(installed) == read_text(node.sim->kubeconfig()));
  CHECK_THAT(read_text(installed),
             Catch::Contains("    server: https://127.0.0.1:" +
                             std::to_string(node.sim->port()) + "\n"));
  CHECK(node.kubectl({"get", "nodes"}, installed).exit_code == 0);
}

TEST_CASE("sim: watches stream, end, and expire after an API restart",
          "[sim]") {
  SimNode node;
  const auto start = std::chrono::steady_clock::now();
  Run watched =
      node.kubectl({"get", "--raw", "/api/v1/nodes?watch=1&timeoutSeconds=1"});
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(watched.exit_code == 0);
  CHECK_THAT(watched.out, Catch::Contains("{\"type\":\"ADDED\",\"object\":{") &&
                              Catch::Contains("\"name\":\"gpu-node-1\""));
  CHECK(took < std::chrono::seconds(5));

  // A change made during a watch arrives as MODIFIED, with a bookmark.
  const std::string rv =
      node.sim->object(kNodePath)["metadata"]["resourceVersion"];
  Background watch({"/usr/bin/kubectl", "--kubeconfig", node.sim->kubeconfig(),
                    "get", "--raw",
                    "/api/v1/nodes?watch=1&allowWatchBookmarks=true&"
                    "resourceVersion=" +
                        rv + "&timeoutSeconds=3"});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  REQUIRE(node.kubectl({"label", "node", "gpu-node-1", "gpunode/test=1"})
              .exit_code == 0);
  Run stream = watch.wait(std::chrono::seconds(20));
  CHECK_THAT(stream.out, Catch::Contains("\"type\":\"MODIFIED\"") &&
                             Catch::Contains("\"gpunode/test\":\"1\"") &&
                             Catch::Contains("\"type\":\"BOOKMARK\""));

  // drop_watches ends an open stream at once.
  Background endless({"/usr/bin/kubectl", "--kubeconfig",
                      node.sim->kubeconfig(), "get", "--raw",
                      "/api/v1/nodes?watch=1"});
  REQUIRE(eventually([&] { return node.sim->stats()["watches_open"] == 1; }));
  node.sim->faults({{"drop_watches", true}});
  CHECK(endless.wait(std::chrono::seconds(5)).exit_code == 0);

  // After a restart an old resourceVersion is 410 Expired, as on k3s.
  const std::string old_rv =
      node.sim->object(kNodePath)["metadata"]["resourceVersion"];
  node.sim->faults({{"restart", true}});
  Run expired = node.kubectl(
      {"get", "--raw",
       "/api/v1/nodes?watch=1&timeoutSeconds=1&resourceVersion=" + old_rv});
  CHECK(expired.exit_code == 0);  // the error is an event of a 200 stream
  CHECK_THAT(expired.out,
             Catch::Contains("\"type\":\"ERROR\"") &&
                 Catch::Contains("\"reason\":\"Expired\"") &&
                 Catch::Contains("\"code\":410") &&
                 Catch::Contains("too old resource version: " + old_rv));
  json list = json::parse(node.kubectl({"get", "--raw", "/api/v1/nodes"}).out);
  CHECK(std::stol(list["metadata"]["resourceVersion"].get<std::string>()) >
        1000000);
}

TEST_CASE("sim: counters and fault knobs", "[sim]") {
  SimNode node;
  K3sSim& sim = *node.sim;
  sim.reset_stats();
  REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml")}).exit_code == 0);
  CHECK(sim.stats()["writes"] == 1);
  REQUIRE(node.kubectl({"get", "runtimeclass"}).exit_code == 0);
  json stats = sim.stats();
  CHECK(stats["writes"] == 1);
  CHECK(stats["by_verb"]["list"] == 1);
  CHECK(stats["requests"].get<int>() > 2);  // discovery and reads count
  REQUIRE(node.kubectl({"delete", "runtimeclass", "nvidia"}).exit_code == 0);
  CHECK(sim.stats()["writes"] == 2);
  CHECK(sim.stats()["by_verb"]["delete"] == 1);
  CHECK(sim.object(kRcPath).is_null());

  sim.faults({{"error_5xx", 1}});
  ApiResponse unavailable = sim.api("GET", kNodePath);
  CHECK(unavailable.status == 503);
  CHECK(json::parse(unavailable.body)["reason"] == "ServiceUnavailable");
  CHECK(sim.api("GET", kNodePath).status == 200);

  sim.faults({{"error_429", 1}, {"retry_after", 2}});
  ApiResponse throttled = sim.api("GET", kNodePath);
  CHECK(throttled.status == 429);
  CHECK(json::parse(throttled.body)["details"]["retryAfterSeconds"] == 2);

  sim.faults({{"latency_ms", 300}});
  auto start = std::chrono::steady_clock::now();
  CHECK(sim.api("GET", kNodePath).status == 200);
  CHECK(std::chrono::steady_clock::now() - start >=
        std::chrono::milliseconds(300));
  sim.faults({{"latency_ms", 0}});

  sim.faults({{"refuse_ms", 700}});
  CHECK_THROWS(sim.api("GET", kNodePath));  // connection refused
  CHECK(eventually([&] {
    try {
      return sim.api("GET", kNodePath).status == 200;
    } catch (const std::exception&) {
      return false;
    }
  }));
}

TEST_CASE(
    "sim: time-slicing advertises GPUs x replicas, a changed config only "
    "after a restart",
    "[sim]") {
  SimNode node;
  Run applied = node.apply({manifest("runtimeclass-nvidia.yml"),
                            manifest("nvidia-device-plugin-timeSlicing.yml")});
  INFO(applied.err);
  REQUIRE(applied.exit_code == 0);
  REQUIRE(node.allocatable_becomes("8"));
  const std::string first_pod = node.plugin_pod()["metadata"]["name"];

  // The plugin read its config at start; a new ConfigMap changes nothing...
  const std::string four = node.variant("nvidia-device-plugin-timeSlicing.yml",
                                        "replicas: 8", "replicas: 4");
  REQUIRE(node.apply({four}).exit_code == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  CHECK(node.allocatable() == "8");
  CHECK(node.plugin_pod()["metadata"]["name"] == first_pod);

  // ...until the pods are restarted (a strategic-merge patch of the
  // template's restartedAt annotation).
  Run restarted = node.kubectl({"-n", "kube-system", "rollout", "restart",
                                "ds/nvidia-device-plugin-daemonset"});
  INFO(restarted.err);
  REQUIRE(restarted.exit_code == 0);
  CHECK_THAT(restarted.out, Catch::Contains("restarted"));
  CHECK(node.allocatable_becomes("4"));
  CHECK(node.plugin_pod()["metadata"]["name"] != first_pod);
  Run status =
      node.kubectl({"-n", "kube-system", "rollout", "status",
                    "ds/nvidia-device-plugin-daemonset", "--timeout=20s"});
  CHECK(status.exit_code == 0);
  CHECK(node.sim->object(kDsPath)["metadata"]["generation"] == 2);
}

TEST_CASE("sim: renameByDefault counts only under sharing.timeSlicing",
          "[sim]") {
  SimNode node;
  SECTION("under timeSlicing: nvidia.com/gpu.shared") {
    REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                        manifest("nvidia-device-plugin-timeSlicing.yml")})
                .exit_code == 0);
    REQUIRE(node.allocatable_becomes("8"));
    REQUIRE(node.apply({node.variant("nvidia-device-plugin-timeSlicing.yml",
                                     "renameByDefault: false",
                                     "renameByDefault: true")})
                .exit_code == 0);
    REQUIRE(node.kubectl({"-n", "kube-system", "rollout", "restart",
                          "ds/nvidia-device-plugin-daemonset"})
                .exit_code == 0);
    CHECK(node.allocatable_becomes("8", "nvidia.com/gpu.shared"));
    // The kubelet keeps the old name, at 0.
    CHECK(node.allocatable() == "0");
  }
  SECTION("under flags (a common mistake): ignored") {
    const std::string misplaced = node.variant(
        "nvidia-device-plugin-timeSlicing.yml", "      migStrategy: none\n",
        "      migStrategy: none\n      renameByDefault: true\n");
    REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"), misplaced})
                .exit_code == 0);
    REQUIRE(node.allocatable_becomes("8"));
    CHECK(node.allocatable("nvidia.com/gpu.shared").empty());
  }
}

TEST_CASE("sim: replicas below 2 crash the plugin", "[sim]") {
  SimNode node;
  REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                      node.variant("nvidia-device-plugin-timeSlicing.yml",
                                   "replicas: 8", "replicas: 1")})
              .exit_code == 0);
  CHECK(eventually([&] {
    return node.kubectl({"get", "pods", "-n", "kube-system"})
               .out.find("CrashLoopBackOff") != std::string::npos;
  }));
  Run log = node.kubectl(
      {"-n", "kube-system", "logs", "ds/nvidia-device-plugin-daemonset"});
  CHECK_THAT(log.out, Catch::Contains("number of replicas must be >= 2"));
  CHECK(node.allocatable().empty());
}

TEST_CASE(
    "sim: without runtimeClassName the plugin runs under runc and "
    "advertises nothing",
    "[sim]") {
  SimNode node;
  const std::string runc = node.variant("nvidia-device-plugin.yml",
                                        "      runtimeClassName: nvidia\n", "");
  REQUIRE(node.apply({runc}).exit_code == 0);
  REQUIRE(eventually(
      [&] { return node.plugin_pod()["status"]["phase"] == "Running"; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(node.allocatable().empty());
  Run log = node.kubectl(
      {"-n", "kube-system", "logs", "ds/nvidia-device-plugin-daemonset"});
  CHECK_THAT(log.out, Catch::Contains("could not load NVML library: "
                                      "libnvidia-ml.so.1: cannot open shared "
                                      "object file"));
}

TEST_CASE("sim: toolkit installed after k3s: no sandbox until k3s restarts",
          "[sim]") {
  SimNode node("toolkit-after-k3s");
  REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                      manifest("nvidia-device-plugin.yml")})
              .exit_code == 0);
  CHECK(eventually([&] {
    const std::string events = node.events();
    return events.find("FailedCreatePodSandBox") != std::string::npos &&
           events.find("no runtime for \"nvidia\" is configured") !=
               std::string::npos;
  }));
  CHECK_THAT(node.kubectl({"get", "pods", "-n", "kube-system"}).out,
             Catch::Contains("ContainerCreating"));
  CHECK(node.allocatable().empty());

  // k3s's restart renders the handler (test/sim/bin/systemctl); the
  // kubelet's next sandbox attempt then succeeds.
  Run restart = run_with_sim(
      {"systemctl", "restart", "k3s"},
      {"GPUNODE_SIM_ROOT=" + node.root, "GPUNODE_SIM_K3S_RENDER_DELAY=0"});
  REQUIRE(restart.exit_code == 0);
  CHECK(node.allocatable_becomes("1"));
}

TEST_CASE("sim: a broken nvidia handler shows where the real one would",
          "[sim]") {
  SECTION("BinaryName points at a runtime that is gone") {
    SimNode node("stale-handler");
    REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                        manifest("nvidia-device-plugin.yml")})
                .exit_code == 0);
    CHECK(eventually([&] {
      const std::string events = node.events();
      return events.find("FailedCreatePodSandBox") != std::string::npos &&
             events.find(
                 "fork/exec /usr/bin/nvidia-container-runtime: no "
                 "such file or directory") != std::string::npos;
    }));
    CHECK(node.allocatable().empty());
  }
  SECTION("SystemdCgroup dropped by a template: killed after seconds") {
    SimNode node("no-systemd-cgroup");
    REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                        manifest("nvidia-device-plugin.yml")})
                .exit_code == 0);
    REQUIRE(node.allocatable_becomes("1"));
    CHECK(eventually(
        [&] {
          const json pod = node.plugin_pod();
          return !pod.is_null() &&
                 pod.value(json::json_pointer("/status/containerStatuses/0/"
                                              "lastState/terminated/exitCode"),
                           0) == 137;
        },
        std::chrono::seconds(8)));
    CHECK(node.allocatable() == "0");  // the kubelet lost the plugin
  }
}

TEST_CASE("sim: without the RuntimeClass the DaemonSet creates no pod",
          "[sim]") {
  SimNode node;
  REQUIRE(node.apply({manifest("nvidia-device-plugin.yml")}).exit_code == 0);
  CHECK(eventually([&] {
    return node.events().find(
               "Error creating: pods \"nvidia-device-plugin-daemonset-\" is "
               "forbidden: pod rejected: RuntimeClass \"nvidia\" not found") !=
           std::string::npos;
  }));
  CHECK(node.plugin_pod().is_null());
  CHECK(node.sim->object(kDsPath)["status"]["numberUnavailable"] == 1);

  REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml")}).exit_code == 0);
  CHECK(node.allocatable_becomes("1"));
}

TEST_CASE("sim: a GPU pod waits for advertised GPUs, then runs CUDA", "[sim]") {
  SimNode node;
  write_text(node.dir.path() + "/smoke.yml", kSmokePod);
  REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                      node.dir.path() + "/smoke.yml"})
              .exit_code == 0);
  const std::string pod_path = "/api/v1/namespaces/default/pods/gpu-smoke";
  CHECK(eventually([&] {
    const json pod = node.sim->object(pod_path);
    for (const auto& c : pod["status"].value("conditions", json::array())) {
      if (c.value("type", "") == "PodScheduled" &&
          c.value("reason", "") == "Unschedulable" &&
          c.value("message", "")
                  .find("0/1 nodes are available: 1 Insufficient "
                        "nvidia.com/gpu.") == 0)
        return true;
    }
    return false;
  }));

  REQUIRE(node.apply({manifest("nvidia-device-plugin.yml")}).exit_code == 0);
  CHECK(eventually([&] {
    return node.sim->object(pod_path)["status"]["phase"] == "Succeeded";
  }));
  Run log = node.kubectl({"logs", "gpu-smoke"});
  CHECK(log.out ==
        "[Vector addition of 50000 elements]\n"
        "Copy input data from the host memory to the CUDA device\n"
        "CUDA kernel launch with 196 blocks of 256 threads\n"
        "Copy output data from the CUDA device to the host memory\n"
        "Test PASSED\n"
        "Done\n");
}

TEST_CASE("sim: an image missing from containerd is ImagePullBackOff",
          "[sim]") {
  SimNode node("good-v3", with_empty_containerd());
  REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                      manifest("nvidia-device-plugin.yml")})
              .exit_code == 0);
  CHECK(eventually([&] {
    return node.kubectl({"get", "pods", "-n", "kube-system"})
               .out.find("ImagePullBackOff") != std::string::npos;
  }));
  CHECK_THAT(node.events(),
             Catch::Contains("Failed to pull image "
                             "\"nvcr.io/nvidia/k8s-device-plugin:v0.19.3\"") &&
                 Catch::Contains("no such host"));
  CHECK(node.allocatable().empty());
}

TEST_CASE("sim: an image missing with pull policy Never is ErrImageNeverPull",
          "[sim]") {
  SimNode node("good-v3", with_empty_containerd());
  write_text(node.dir.path() + "/never.yml",
             replaced(kSmokePod,
                      "    resources:\n      limits:\n        "
                      "nvidia.com/gpu: 1\n",
                      "    imagePullPolicy: Never\n"));
  REQUIRE(node.apply({manifest("runtimeclass-nvidia.yml"),
                      node.dir.path() + "/never.yml"})
              .exit_code == 0);
  // No GPU asked for: scheduled at once, then no pull is tried.
  CHECK(eventually([&] {
    return node.kubectl({"get", "pods"}).out.find("ErrImageNeverPull") !=
           std::string::npos;
  }));
  CHECK_THAT(node.events("default"),
             Catch::Contains("Container image "
                             "\"nvcr.io/nvidia/k8s/cuda-sample:vectoradd-"
                             "cuda12.5.0\" is not present with pull policy "
                             "of Never"));
  CHECK_THAT(node.events("default"),
             !Catch::Contains("Failed to pull image "
                              "\"nvcr.io/nvidia/k8s/cuda-"
                              "sample"));
}
