// The multi-node simulated k3s (test/sim/k3s_sim.py --nodes-json) checked
// as a cluster: a kubelet's identity gets exactly what the Node authorizer
// and NodeRestriction give it (kube-apiserver's 403 bodies, byte for byte),
// the DaemonSet controller follows node affinity, a CPU-only node leaves
// an nvidia pod stuck as k3s does, and each GPU node advertises its own
// count.
#include "sim_cluster.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

const std::string kDsPath =
    "/apis/apps/v1/namespaces/kube-system/daemonsets/"
    "nvidia-device-plugin-daemonset";

std::string manifest(const std::string& name) {
  return std::string(GPUNODE_TEST_SIM) + "/../../manifests/" + name;
}

// A platform manifest as an earlier gpunode applied it, or as the upstream
// one is: without the node affinity on nvidia.com/gpu.present, so the
// DaemonSet puts a pod on every node.
std::string without_affinity(const TempDir& dir, const std::string& name) {
  std::string text = read_text(manifest(name));
  const std::size_t from = text.find("      # Only on GPU nodes");
  const std::size_t to = text.find("      tolerations:", from);
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  text.erase(from, to - from);
  REQUIRE(text.find("nodeAffinity") == std::string::npos);
  const std::string path = dir.path() + "/no-affinity-" + name;
  write_text(path, text);
  return path;
}

bool eventually(const std::function<bool()>& done,
                std::chrono::milliseconds limit = std::chrono::seconds(15)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// A server without GPUs, two GPU agents with different counts and one
// CPU-only agent: the issue's cluster.
SimClusterOptions four_nodes() {
  SimClusterOptions o;
  o.nodes = {{"srv", true, 0, "", false},
             {"gpu-a", false, 2, "", false},
             {"gpu-b", false, 4, "", false},
             {"cpu-c", false, 0, "", false}};
  return o;
}

// kube-apiserver's 403 Status as the simulator serializes it.
std::string forbidden_body(const std::string& message,
                           const nlohmann::ordered_json& details) {
  nlohmann::ordered_json body = {
      {"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
      {"status", "Failure"}, {"message", message}, {"reason", "Forbidden"},
      {"details", details},  {"code", 403}};
  return body.dump() + "\n";
}

std::string apply_labels(const std::string& node, const json& labels) {
  return json{{"apiVersion", "v1"},
              {"kind", "Node"},
              {"metadata", {{"name", node}, {"labels", labels}}}}
      .dump();
}

// The nodes the DaemonSet's pods are bound to (the scheduler binds them).
std::set<std::string> ds_pod_nodes(SimCluster& c, const std::string& label) {
  Run r = c.kubectl(
      {"get", "pods", "-n", "kube-system", "-l", label, "-o", "json"});
  std::set<std::string> out;
  const json pods = json::parse(r.out, nullptr, false);
  if (!pods.is_object()) return {"(kubectl failed: " + r.err + ")"};
  for (const auto& p : pods["items"]) {
    if (p["metadata"].contains("deletionTimestamp")) continue;
    out.insert(p["spec"].value("nodeName", std::string("(unbound)")));
  }
  return out;
}

std::string mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  char text[8];
  std::snprintf(text, sizeof text, "%o", st.st_mode & 0777);
  return text;
}

}  // namespace

TEST_CASE(
    "sim cluster: a kubelet's identity as Node and NodeRestriction decide",
    "[e2e][sim]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  K3sSim& sim = c.sim();
  // Objects for the graph: a RuntimeClass, two ConfigMaps, and a DaemonSet
  // whose pods mount only one of them.
  REQUIRE(c.kubectl({"apply", "--server-side", "-f",
                     manifest("runtimeclass-nvidia.yml")})
              .exit_code == 0);
  const std::string ds = c.sim().dir() + "/mounts.yml";
  write_text(
      ds,
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-mounted\n"
      "  namespace: kube-system\ndata:\n  k: v\n---\n"
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-other\n"
      "  namespace: kube-system\ndata:\n  k: v\n---\n"
      "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: mounts\n"
      "  namespace: kube-system\nspec:\n  selector:\n    matchLabels:\n"
      "      app: mounts\n  template:\n    metadata:\n      labels:\n"
      "        app: mounts\n    spec:\n      containers:\n      - name: c\n"
      "        image: registry.example/pause:1\n        volumeMounts:\n"
      "        - name: cfg\n          mountPath: /cfg\n      volumes:\n"
      "      - name: cfg\n        configMap:\n          name: cm-mounted\n");
  Run applied = c.kubectl({"apply", "--server-side", "-f", ds});
  INFO(applied.err);
  REQUIRE(applied.exit_code == 0);
  REQUIRE(
      eventually([&] { return ds_pod_nodes(c, "app=mounts").size() == 4; }));

  struct Case {
    const char* what;
    std::string method, path, body, content_type;
    int code;
    std::string forbidden;  // the exact 403 body, when code is 403
  };
  const std::string apply = "application/apply-patch+yaml";
  const std::string own = "/api/v1/nodes/gpu-a?fieldManager=gpunode";
  const std::vector<Case> cases = {
      {"GET its own Node", "GET", "/api/v1/nodes/gpu-a", "", "", 200, ""},
      {"GET another Node", "GET", "/api/v1/nodes/gpu-b", "", "", 403,
       forbidden_body(
           "nodes \"gpu-b\" is forbidden: User \"system:node:gpu-a\" "
           "cannot get resource \"nodes\" in API group \"\" at the "
           "cluster scope: node 'gpu-a' cannot read 'gpu-b', only "
           "its own Node object",
           {{"name", "gpu-b"}, {"kind", "nodes"}})},
      {"LIST all nodes", "GET", "/api/v1/nodes", "", "", 403,
       forbidden_body("nodes is forbidden: User \"system:node:gpu-a\" cannot "
                      "list resource \"nodes\" in API group \"\" at the "
                      "cluster scope: node 'gpu-a' cannot read all nodes, "
                      "only its own Node object",
                      {{"kind", "nodes"}})},
      {"LIST nodes with its own name", "GET",
       "/api/v1/nodes?fieldSelector=metadata.name%3Dgpu-a", "", "", 200, ""},
      {"WATCH nodes with another name", "GET",
       "/api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dgpu-b", "", "", 403,
       forbidden_body("nodes \"gpu-b\" is forbidden: User "
                      "\"system:node:gpu-a\" cannot watch resource \"nodes\" "
                      "in API group \"\" at the cluster scope: node 'gpu-a' "
                      "cannot read 'gpu-b', only its own Node object",
                      {{"name", "gpu-b"}, {"kind", "nodes"}})},
      {"LIST DaemonSets", "GET",
       "/apis/apps/v1/namespaces/kube-system/daemonsets", "", "", 403,
       forbidden_body("daemonsets.apps is forbidden: User "
                      "\"system:node:gpu-a\" cannot list resource "
                      "\"daemonsets\" in API group \"apps\" in the namespace "
                      "\"kube-system\"",
                      {{"group", "apps"}, {"kind", "daemonsets"}})},
      {"GET the DaemonSet", "GET", kDsPath, "", "", 403,
       forbidden_body("daemonsets.apps \"nvidia-device-plugin-daemonset\" is "
                      "forbidden: User \"system:node:gpu-a\" cannot get "
                      "resource \"daemonsets\" in API group \"apps\" in the "
                      "namespace \"kube-system\"",
                      {{"name", "nvidia-device-plugin-daemonset"},
                       {"group", "apps"},
                       {"kind", "daemonsets"}})},
      {"GET a RuntimeClass", "GET",
       "/apis/node.k8s.io/v1/runtimeclasses/nvidia", "", "", 200, ""},
      {"LIST RuntimeClasses", "GET", "/apis/node.k8s.io/v1/runtimeclasses", "",
       "", 200, ""},
      {"LIST pods everywhere", "GET", "/api/v1/pods", "", "", 403,
       forbidden_body("pods is forbidden: User \"system:node:gpu-a\" cannot "
                      "list resource \"pods\" in API group \"\" at the "
                      "cluster scope: can only list/watch pods with "
                      "spec.nodeName field selector",
                      {{"kind", "pods"}})},
      {"LIST its own pods", "GET",
       "/api/v1/pods?fieldSelector=spec.nodeName%3Dgpu-a", "", "", 200, ""},
      {"GET a ConfigMap its pod mounts", "GET",
       "/api/v1/namespaces/kube-system/configmaps/cm-mounted", "", "", 200, ""},
      {"GET a ConfigMap no pod of it mounts", "GET",
       "/api/v1/namespaces/kube-system/configmaps/cm-other", "", "", 403,
       forbidden_body("configmaps \"cm-other\" is forbidden: User "
                      "\"system:node:gpu-a\" cannot get resource "
                      "\"configmaps\" in API group \"\" in the namespace "
                      "\"kube-system\": no relationship found between node "
                      "'gpu-a' and this object",
                      {{"name", "cm-other"}, {"kind", "configmaps"}})},
      {"LIST ConfigMaps", "GET", "/api/v1/namespaces/kube-system/configmaps",
       "", "", 403,
       forbidden_body("configmaps is forbidden: User \"system:node:gpu-a\" "
                      "cannot list resource \"configmaps\" in API group \"\" "
                      "in the namespace \"kube-system\": No Object name found",
                      {{"kind", "configmaps"}})},
      {"apply its own labels", "PATCH", own,
       apply_labels("gpu-a", {{"nvidia.com/gpu.present", "true"}}), apply, 200,
       ""},
      {"apply another node's labels", "PATCH",
       "/api/v1/nodes/gpu-b?fieldManager=gpunode",
       apply_labels("gpu-b", {{"nvidia.com/gpu.present", "true"}}), apply, 403,
       forbidden_body("nodes \"gpu-b\" is forbidden: node \"gpu-a\" is not "
                      "allowed to modify node \"gpu-b\"",
                      {{"name", "gpu-b"}, {"kind", "nodes"}})},
      {"apply another node's labels, dry run", "PATCH",
       "/api/v1/nodes/gpu-b?fieldManager=gpunode&dryRun=All",
       apply_labels("gpu-b", {{"nvidia.com/gpu.present", "true"}}), apply, 403,
       forbidden_body("nodes \"gpu-b\" is forbidden: node \"gpu-a\" is not "
                      "allowed to modify node \"gpu-b\"",
                      {{"name", "gpu-b"}, {"kind", "nodes"}})},
      {"apply a node-role label", "PATCH", own,
       apply_labels("gpu-a", {{"node-role.kubernetes.io/worker", "true"}}),
       apply, 403,
       forbidden_body("nodes \"gpu-a\" is forbidden: is not allowed to modify "
                      "labels: node-role.kubernetes.io/worker",
                      {{"name", "gpu-a"}, {"kind", "nodes"}})},
      {"apply a node-restriction label, dry run", "PATCH", own + "&dryRun=All",
       apply_labels("gpu-a", {{"node-restriction.kubernetes.io/x", "y"}}),
       apply, 403,
       forbidden_body("nodes \"gpu-a\" is forbidden: is not allowed to modify "
                      "labels: node-restriction.kubernetes.io/x",
                      {{"name", "gpu-a"}, {"kind", "nodes"}})},
      {"taint itself", "PATCH", "/api/v1/nodes/gpu-a",
       R"({"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}})",
       "application/merge-patch+json", 403,
       forbidden_body("nodes \"gpu-a\" is forbidden: node \"gpu-a\" is not "
                      "allowed to modify taints",
                      {{"name", "gpu-a"}, {"kind", "nodes"}})},
      {"create an Event", "POST", "/api/v1/namespaces/default/events",
       R"({"metadata":{"name":"e1"},"involvedObject":{"kind":"Node","name":"gpu-a"},"reason":"R","message":"m"})",
       "application/json", 201, ""},
      {"LIST Events", "GET", "/api/v1/namespaces/default/events", "", "", 403,
       forbidden_body("events is forbidden: User \"system:node:gpu-a\" cannot "
                      "list resource \"events\" in API group \"\" in the "
                      "namespace \"default\"",
                      {{"kind", "events"}})},
  };
  // One cluster for the whole table (a SECTION would start one per row).
  for (const Case& k : cases) {
    ApiResponse r = sim.api_as(
        "gpu-a", k.method, k.path, k.body,
        k.content_type.empty() ? "application/json" : k.content_type);
    INFO(k.what << ": " << r.body);
    CHECK(r.status == k.code);
    if (k.code == 403) CHECK(r.body == k.forbidden);
  }

  {  // server-side apply by the node: its manager owns what it applied
    REQUIRE(sim.api_as("gpu-a", "PATCH", own,
                       apply_labels("gpu-a", {{"nvidia.com/gpu.count", "2"}}),
                       apply)
                .status == 200);
    const json node = c.object("/api/v1/nodes/gpu-a");
    const json& labels = node["metadata"]["labels"];
    CHECK(labels.value("nvidia.com/gpu.count", "") == "2");
    // The label it applied before and not now is gone (it owned it alone).
    CHECK_FALSE(labels.contains("nvidia.com/gpu.present"));
    CHECK(c.stats()["writes_by_user"]["system:node:gpu-a"].get<int>() >= 1);
  }

  {  // admin is unchanged: everything, any node
    for (const char* path :
         {"/api/v1/nodes", "/api/v1/nodes/gpu-b", "/api/v1/pods",
          "/apis/apps/v1/namespaces/kube-system/daemonsets",
          "/api/v1/namespaces/kube-system/configmaps/cm-other"}) {
      INFO(path);
      CHECK(sim.api("GET", path).status == 200);
    }
    CHECK(sim.api("PATCH", "/api/v1/nodes/gpu-b?fieldManager=admin",
                  apply_labels("gpu-b",
                               {{"node-role.kubernetes.io/worker", "true"}}),
                  apply)
              .status == 200);
  }
}

TEST_CASE("sim cluster: kubelet credentials where k3s writes them",
          "[e2e][sim]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  for (const std::string& name : c.node_names()) {
    INFO(name);
    const SimCluster::Node& n = c.node(name);
    const std::string agent = n.root + "/var/lib/rancher/k3s/agent";
    CHECK(c.kubelet_kubeconfig(name) == agent + "/kubelet.kubeconfig");
    const std::string text = read_text(c.kubelet_kubeconfig(name));
    CHECK_THAT(text, Catch::Contains("    certificate-authority: "
                                     "/var/lib/rancher/k3s/agent/"
                                     "server-ca.crt\n") &&
                         Catch::Contains("    client-key: /var/lib/rancher/k3s/"
                                         "agent/client-kubelet.key\n"));
    CHECK(mode_of(agent + "/client-kubelet.key") == "600");
    CHECK(mode_of(agent + "/client-kubelet.crt") == "644");
    // Only servers hold the admin kubeconfig.
    CHECK(mode_of(n.root + "/etc/rancher/k3s/k3s.yaml") ==
          (n.server ? "600" : "missing"));
    // kubectl with that identity reads its node and nothing else.
    Run own = c.kubectl_as(name, {"get", "node", name, "-o", "name"});
    INFO(own.err);
    CHECK(own.exit_code == 0);
    CHECK(own.out == "node/" + name + "\n");
    Run other =
        c.kubectl_as(name, {"get", "node", name == "srv" ? "gpu-a" : "srv"});
    CHECK(other.exit_code != 0);
    CHECK_THAT(other.err, Catch::Contains("only its own Node object"));
  }
  CHECK(c.admin_kubeconfig() != "");
  CHECK(read_text(c.admin_kubeconfig()) ==
        read_text(c.node("srv").root + "/etc/rancher/k3s/k3s.yaml"));
  // Servers keep k3s's role labels; agents have none; addresses differ.
  const json srv = c.object("/api/v1/nodes/srv");
  const json agent = c.object("/api/v1/nodes/gpu-a");
  CHECK(srv["metadata"]["labels"].contains(
      "node-role.kubernetes.io/control-plane"));
  CHECK_FALSE(agent["metadata"]["labels"].contains(
      "node-role.kubernetes.io/control-plane"));
  CHECK_FALSE(
      agent["metadata"]["labels"].contains("node-role.kubernetes.io/master"));
  CHECK(srv["status"]["addresses"][0]["address"] !=
        agent["status"]["addresses"][0]["address"]);
}

TEST_CASE(
    "sim cluster: a DaemonSet with gpu.present affinity follows the label",
    "[e2e][sim]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  const std::string ds = c.sim().dir() + "/affine.yml";
  write_text(
      ds,
      "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: affine\n"
      "  namespace: kube-system\nspec:\n  selector:\n    matchLabels:\n"
      "      app: affine\n  template:\n    metadata:\n      labels:\n"
      "        app: affine\n    spec:\n      affinity:\n"
      "        nodeAffinity:\n"
      "          requiredDuringSchedulingIgnoredDuringExecution:\n"
      "            nodeSelectorTerms:\n            - matchExpressions:\n"
      "              - key: nvidia.com/gpu.present\n"
      "                operator: In\n                values: [\"true\"]\n"
      "      containers:\n      - name: c\n"
      "        image: registry.example/pause:1\n");
  REQUIRE(c.kubectl({"apply", "--server-side", "-f", ds}).exit_code == 0);
  const std::string path =
      "/apis/apps/v1/namespaces/kube-system/daemonsets/affine";
  CHECK(eventually([&] {
    return c.object(path)["status"].value("desiredNumberScheduled", -1) == 0;
  }));
  CHECK(ds_pod_nodes(c, "app=affine").empty());

  // The node's own identity labels it; the pod follows.
  REQUIRE(
      c.sim()
          .api_as("gpu-a", "PATCH", "/api/v1/nodes/gpu-a?fieldManager=gpunode",
                  apply_labels("gpu-a", {{"nvidia.com/gpu.present", "true"}}),
                  "application/apply-patch+yaml")
          .status == 200);
  CHECK(eventually([&] {
    return ds_pod_nodes(c, "app=affine") == std::set<std::string>{"gpu-a"};
  }));
  REQUIRE(c.kubectl({"label", "node", "gpu-b", "nvidia.com/gpu.present=true"})
              .exit_code == 0);
  CHECK(eventually([&] {
    return ds_pod_nodes(c, "app=affine") ==
           std::set<std::string>{"gpu-a", "gpu-b"};
  }));
  CHECK(eventually([&] {
    return c.object(path)["status"].value("desiredNumberScheduled", -1) == 2;
  }));
  // The label goes: so does the pod.
  REQUIRE(c.kubectl({"label", "node", "gpu-a", "nvidia.com/gpu.present-"})
              .exit_code == 0);
  CHECK(eventually([&] {
    return ds_pod_nodes(c, "app=affine") == std::set<std::string>{"gpu-b"};
  }));
  CHECK(c.object(path)["status"].value("desiredNumberScheduled", -1) == 1);
}

TEST_CASE(
    "sim cluster: the plugin without affinity: GPU nodes advertise their own "
    "counts, CPU-only nodes stay ContainerCreating",
    "[e2e][sim]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  for (const char* name : {"gpu-a", "gpu-b"}) {
    gpunode::ProcessResult imported =
        c.node(name).containerd->ctr({"images", "import", c.image_archive()});
    INFO(imported.err);
    REQUIRE(imported.succeeded());
  }
  TempDir files;
  REQUIRE(c.kubectl({"apply", "--server-side", "-f",
                     manifest("runtimeclass-nvidia.yml"), "-f",
                     without_affinity(files, "nvidia-device-plugin.yml")})
              .exit_code == 0);
  CHECK(eventually([&] { return c.allocatable("gpu-a") == "2"; }));
  CHECK(eventually([&] { return c.allocatable("gpu-b") == "4"; }));
  CHECK(c.allocatable("cpu-c").empty());
  CHECK(c.allocatable("srv").empty());
  CHECK(ds_pod_nodes(c, "name=nvidia-device-plugin-ds") ==
        std::set<std::string>{"srv", "gpu-a", "gpu-b", "cpu-c"});

  // The CPU-only nodes: no nvidia handler, the sandbox never comes.
  Run pods = c.kubectl({"get", "pods", "-n", "kube-system", "-o", "wide"});
  INFO(pods.out);
  for (const char* name : {"cpu-c", "srv"}) {
    Run pod = c.kubectl(
        {"get", "pods", "-n", "kube-system", "--field-selector",
         std::string("spec.nodeName=") + name, "-o",
         "jsonpath={.items[0].status.containerStatuses[0].state.waiting."
         "reason}"});
    CHECK(pod.out == "ContainerCreating");
  }
  Run events = c.kubectl({"get", "events", "-n", "kube-system", "-o", "json"});
  const json list = json::parse(events.out);
  std::set<std::string> stuck;
  for (const auto& e : list["items"]) {
    if (e.value("reason", "") == "FailedCreatePodSandBox" &&
        e.value("message", "")
                .find("no runtime for \"nvidia\" is configured") !=
            std::string::npos)
      stuck.insert(e["source"].value("host", ""));
  }
  CHECK(stuck == std::set<std::string>{"cpu-c", "srv"});
  const json status = c.object(kDsPath)["status"];
  CHECK(status["desiredNumberScheduled"] == 4);
  CHECK(status["numberReady"] == 2);
  CHECK(status["numberUnavailable"] == 2);

  // More GPUs than any node has: the scheduler's reasons over all nodes.
  const std::string big = c.sim().dir() + "/big.yml";
  write_text(big,
             "apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n"
             "  namespace: default\nspec:\n  runtimeClassName: nvidia\n"
             "  containers:\n  - name: cuda\n    image: registry.example/c:1\n"
             "    resources:\n      limits:\n        nvidia.com/gpu: 8\n");
  REQUIRE(c.kubectl({"apply", "--server-side", "-f", big}).exit_code == 0);
  CHECK(eventually([&] {
    const json pod = c.object("/api/v1/namespaces/default/pods/big");
    for (const auto& cond : pod["status"].value("conditions", json::array()))
      if (cond.value("type", "") == "PodScheduled")
        return cond.value("message", "") ==
               "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. "
               "preemption: 0/4 nodes are available: 4 No preemption "
               "victims found for incoming pod.";
    return false;
  }));

  // Each node's knob is its own.
  c.set_node("gpu-b", {{"healthy", 3}});
  CHECK(eventually([&] { return c.allocatable("gpu-b") == "3"; }));
  CHECK(c.allocatable("gpu-a") == "2");

  // Still stuck a while later, and an idle cluster writes nothing: the
  // store's resourceVersion (a list's) stands still.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto store_rv = [&] {
    return json::parse(c.sim()
                           .api("GET", "/api/v1/namespaces")
                           .body)["metadata"]["resourceVersion"]
        .get<std::string>();
  };
  const std::string rv = store_rv();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  CHECK(store_rv() == rv);
  CHECK(c.object(kDsPath)["status"]["numberReady"] == 2);
}

TEST_CASE("sim cluster: gpunode status reads each node's own tree",
          "[e2e][sim]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  // Each node's env and root: its own unit, its own GPUs (or none).
  Run a = c.gpunode("gpu-a", {"status"});
  Run b = c.gpunode("gpu-b", {"status"});
  Run cpu = c.gpunode("cpu-c", {"status"});
  CHECK_THAT(a.out + a.err,
             Catch::Contains("k3s installed (/etc/systemd/system/"
                             "k3s-agent.service)") &&
                 Catch::Contains("2 GPUs: 2x NVIDIA H200"));
  CHECK_THAT(b.out + b.err, Catch::Contains("4 GPUs: 4x NVIDIA H200"));
  CHECK_THAT(cpu.out + cpu.err, !Catch::Contains("NVIDIA H200"));
  // Agents have no admin kubeconfig: their run is the node part, with the
  // kubelet's own credentials, which reach the cluster.
  CHECK_THAT(
      a.out + a.err,
      Catch::Contains("as /var/lib/rancher/k3s/agent/kubelet.kubeconfig") &&
          Catch::Contains("RuntimeClass nvidia does not exist") &&
          !Catch::Contains("does not exist; ") &&
          !Catch::Contains("[ERROR cluster]"));
  Run srv = c.gpunode("srv", {"status"});
  // The server reached the cluster with the admin kubeconfig.
  CHECK_THAT(srv.out + srv.err,
             Catch::Contains("RuntimeClass nvidia does not exist") &&
                 !Catch::Contains("/etc/rancher/k3s/k3s.yaml does not exist"));
}

namespace {

constexpr const char* kPluginImage = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";
constexpr const char* kPluginRepo = "nvcr.io/nvidia/k8s-device-plugin";

// Imports the plugin archive into the node's containerd; with `by_digest`
// also names it REPO@sha256:..., the shape the embedded mirror can serve.
void import_plugin(SimCluster& c, const std::string& node, bool by_digest) {
  Containerd& ctd = *c.node(node).containerd;
  REQUIRE(ctd.ctr({"images", "import", c.image_archive()}).succeeded());
  if (!by_digest) return;
  gpunode::ProcessResult ls =
      ctd.ctr({"images", "ls", "name==" + std::string(kPluginImage)});
  const std::size_t at = ls.out.find("sha256:");
  REQUIRE(at != std::string::npos);
  const std::string digest = ls.out.substr(at, 71);
  REQUIRE(ctd.ctr({"images", "tag", kPluginImage,
                   std::string(kPluginRepo) + "@" + digest})
              .succeeded());
}

std::string kubelet_events(SimCluster& c, const std::string& node) {
  Run events = c.kubectl({"get", "events", "-n", "kube-system", "-o", "json"});
  const json list = json::parse(events.out);
  std::string out;
  for (const auto& e : list["items"])
    if (e["source"].value("host", "") == node)
      out += e.value("reason", "") + ": " + e.value("message", "") + "\n";
  return out;
}

}  // namespace

TEST_CASE("sim cluster: the embedded registry mirror pulls from a peer",
          "[e2e][sim]") {
  REQUIRE_PARTS();
  struct Row {
    const char* what;
    bool mirror, by_digest, pulled;
  };
  const Row row = GENERATE(
      Row{"mirror on, the peer holds a digest reference", true, true, true},
      Row{"mirror on, the peer holds only the tag", true, false, false},
      Row{"mirror off", false, true, false});
  INFO(row.what);
  SimClusterOptions o;
  o.nodes = {{"srv", true, 0, "", row.mirror},
             {"gpu-a", false, 2, "", row.mirror},
             {"gpu-b", false, 4, "", row.mirror}};
  SimCluster c(o);
  import_plugin(c, "gpu-a", row.by_digest);
  TempDir files;
  REQUIRE(c.kubectl({"apply", "--server-side", "-f",
                     manifest("runtimeclass-nvidia.yml"), "-f",
                     without_affinity(files, "nvidia-device-plugin.yml")})
              .exit_code == 0);
  CHECK(eventually([&] { return c.allocatable("gpu-a") == "2"; }));
  if (row.pulled) {
    CHECK(eventually([&] { return c.allocatable("gpu-b") == "4"; },
                     std::chrono::seconds(60)));
    const std::string events = kubelet_events(c, "gpu-b");
    CHECK_THAT(events,
               Catch::Contains("Pulling: Pulling image \"" +
                               std::string(kPluginImage) + "\"") &&
                   Catch::Contains("Pulled: Successfully pulled image \"" +
                                   std::string(kPluginImage) + "\" in "));
    // For real: gpu-b's own containerd holds it now.
    const auto names = c.node("gpu-b").containerd->image_names();
    CHECK(std::find(names.begin(), names.end(), kPluginImage) != names.end());
  } else {
    CHECK(eventually([&] {
      return kubelet_events(c, "gpu-b").find("Failed: Failed to pull image") !=
             std::string::npos;
    }));
    CHECK(c.allocatable("gpu-b").empty());
    CHECK(c.node("gpu-b").containerd->image_names().empty());
  }
}
