// Many nodes, end to end with the real binary: one simulated API server,
// a k3s server without GPUs, GPU agents with their own host trees, real
// containerds and kubelet identities (system:node:NAME, authorized as the
// Node authorizer and NodeRestriction do), and a CPU-only agent. The
// cluster part runs once with the admin kubeconfig; each agent's node part
// with its own identity, in either order; reruns write nothing.
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "containerd_fixture.hpp"
#include "sim_cluster.hpp"
#include "sim_gpu_node.hpp"  // kDsPath
#include "test_support.hpp"
#include "tree_writes.hpp"

using namespace gpunode::test;
using json = nlohmann::json;

namespace {

// server (no GPU), gpu-a (1 GPU), gpu-b (2 GPUs), cpu-1 (none): agents.
SimClusterOptions four_nodes() {
  SimClusterOptions o;
  o.nodes = {{"server", true, 0, "cpu-server"},
             {"gpu-a", false, 1, ""},
             {"gpu-b", false, 2, ""},
             {"cpu-1", false, 0, "cpu-agent"}};
  return o;
}

// The cluster part, from the server: the admin kubeconfig k3s wrote there.
Run cluster_part(SimCluster& c, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"install", "--scope", "cluster", "--timeout",
                                "60s"};
  args.insert(args.end(), extra.begin(), extra.end());
  return c.gpunode("server", args);
}

// A node part, on an agent: no flags about scope or credentials, as an
// operator runs `sudo ./install.sh` from the stick.
Run node_part(SimCluster& c, const std::string& node,
              std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"install", "--image-archive", c.image_archive(),
                                "--timeout", "60s"};
  args.insert(args.end(), extra.begin(), extra.end());
  return c.gpunode(node, args);
}

// The stage events of a --json run, by stage, and the result event.
std::map<std::string, json> stage_events(const Run& r) {
  std::map<std::string, json> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    if (j.value("event", "") == "stage") out[j.value("stage", "")] = j;
    if (j.value("event", "") == "result") out["result"] = j;
  }
  return out;
}

long long writes_by(SimCluster& c, const std::string& user) {
  const json s = c.stats();
  return s.value("writes_by_user", json::object()).value(user, 0LL);
}

}  // namespace

TEST_CASE(
    "many nodes: the cluster part once, then each agent with its own "
    "identity",
    "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());

  Run cluster = cluster_part(c, {"--json"});
  INFO(cluster.err);
  REQUIRE(cluster.exit_code == 0);
  auto ev = stage_events(cluster);
  CHECK(ev["result"]["scope"] == "cluster");
  CHECK(ev["driver"]["status"] == "skipped");  // the host layers are not its
  CHECK(ev["allocatable"]["code"] == "allocatable.no-gpu-nodes");
  // The DaemonSet selects GPU nodes only: no node is labelled yet.
  CHECK(c.object(kDsPath)["status"].value("desiredNumberScheduled", -1) == 0);

  for (const std::string node : {"gpu-a", "gpu-b"}) {
    c.reset_stats();
    Run agent = node_part(c, node, {"--json"});
    INFO(node << "\n" << agent.err);
    REQUIRE(agent.exit_code == 0);
    auto e = stage_events(agent);
    CHECK(e["result"]["scope"] == "node");
    CHECK(e["result"]["role"] == "agent");
    CHECK(e["result"]["kubeconfig"] ==
          "/var/lib/rancher/k3s/agent/kubelet.kubeconfig");
    CHECK(e["labels"]["status"] == "applied");
    CHECK(e["runtimeclass"]["status"] == "satisfied");
    // Every write this run made was the node's own, none an admin's.
    CHECK(writes_by(c, "system:node:" + node) >= 1);
    CHECK(writes_by(c, "system:admin") == 0);
  }
  CHECK(c.allocatable("gpu-a") == "1");
  CHECK(c.allocatable("gpu-b") == "2");
  CHECK(c.allocatable("cpu-1").empty());
  CHECK(c.allocatable("server").empty());
  // The CPU-only agent got no plugin pod to hang in ContainerCreating.
  Run pods = c.kubectl({"-n", "kube-system", "get", "pods", "-o",
                        "jsonpath={.items[*].spec.nodeName}"});
  CHECK(pods.out.find("cpu-1") == std::string::npos);
  CHECK(pods.out.find("gpu-a") != std::string::npos);

  SECTION("a rerun anywhere makes 0 writes") {
    // The API's writes (the simulator counts every non-GET request), each
    // node's containerd (its images with their labels, leases and blobs:
    // its database's times would also show containerd's own garbage
    // collection) and each host tree, times included (README, "State").
    auto host = [&](const std::string& n) {
      return snapshot_times(c.node(n).root);
    };
    auto containerd = [&](const std::string& n) {
      Containerd& d = *c.node(n).containerd;
      std::string state;
      for (const char* what : {"images", "leases"})
        state += d.ctr({what, "ls"}).out;
      for (const auto& [digest, size] : d.content_digests())
        state += digest + " " + size + "\n";
      return state;
    };
    auto expect_no_writes = [&](const std::string& n, const TimesSnapshot& h,
                                const std::string& d) {
      INFO(n);
      CHECK(written_between(h, host(n)) == std::vector<std::string>{});
      CHECK(containerd(n) == d);
    };
    std::map<std::string, TimesSnapshot> hosts;
    std::map<std::string, std::string> containerds;
    for (const std::string n : {"gpu-a", "gpu-b"}) {
      hosts[n] = host(n);
      containerds[n] = containerd(n);
    }
    c.reset_stats();
    Run again = cluster_part(c);
    INFO(again.err);
    CHECK(again.exit_code == 0);
    CHECK_THAT(again.err, Catch::Contains("every GPU node advertises its "
                                          "slots"));
    for (const std::string node : {"gpu-a", "gpu-b"}) {
      Run rerun = node_part(c, node);
      INFO(rerun.err);
      CHECK(rerun.exit_code == 0);
      expect_no_writes(node, hosts[node], containerds[node]);
    }
    CHECK(c.stats()["writes"] == 0);
    // The server's first rerun journals what it found since its first run
    // (the agents' slots, where it saw no GPU node yet); its next writes
    // nothing.
    const TimesSnapshot server_host = host("server");
    const std::string server_containerd = containerd("server");
    CHECK(cluster_part(c).exit_code == 0);
    expect_no_writes("server", server_host, server_containerd);
  }
  SECTION("status on an agent shows the cluster-wide plugin settings") {
    Run s = c.gpunode("gpu-a", {"status", "--json"});
    INFO(s.err);
    CHECK(s.exit_code == 0);
    auto e = stage_events(s);
    CHECK(e["plugin"]["facts"]["cluster_plugin"]["variant"] == "default");
    CHECK(e["allocatable"]["facts"]["nodes"][0]["expected"] == 1);
    CHECK(e["allocatable"]["facts"]["nodes"][0]["advertised"] == 1);
  }
  // Regression (independent try of issue 26): the node part's plan said
  // now 0 and no resource while the node advertised its slots.
  SECTION("an agent's plan --json says what its node advertises now") {
    Run p = c.gpunode("gpu-a", {"plan", "--json"});
    INFO(p.err);
    CHECK(p.exit_code == 0);
    const json plan = stage_events(p)["result"].at("plan");
    REQUIRE(plan["nodes"].size() == 1);
    CHECK(plan["nodes"][0]["node"] == "gpu-a");
    CHECK(plan["nodes"][0]["now"] == 1);
    CHECK(plan["nodes"][0]["now_resource"] == "nvidia.com/gpu");
    CHECK(plan["nodes"][0]["after"] == 1);
  }
}

TEST_CASE(
    "many nodes: an agent first is told the cluster part is missing, "
    "then converges",
    "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  Run first = node_part(c, "gpu-a");
  INFO(first.err);
  CHECK(first.exit_code == 1);
  CHECK_THAT(first.err, Catch::Contains("RuntimeClass nvidia does not exist") &&
                            Catch::Contains("gpunode install --scope cluster"));
  // Not labelled: the DaemonSet, once there, must not land on a node whose
  // part stopped short.
  CHECK(c.object("/api/v1/nodes/gpu-a")["metadata"]["labels"].value(
            "nvidia.com/gpu.present", "") == "");
  Run cluster = cluster_part(c);
  INFO(cluster.err);
  CHECK(cluster.exit_code == 0);
  CHECK_THAT(cluster.err, Catch::Contains("no GPU node yet"));
  Run again = node_part(c, "gpu-a");
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(c.allocatable("gpu-a") == "1");
}

TEST_CASE(
    "many nodes: time-slicing 4 -> 2 -> default changes every GPU node, "
    "only with --all-nodes",
    "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  REQUIRE(cluster_part(c, {"--variant", "time-slicing", "--replicas", "4"})
              .exit_code == 0);
  REQUIRE(node_part(c, "gpu-a").exit_code == 0);
  REQUIRE(node_part(c, "gpu-b").exit_code == 0);
  CHECK(c.allocatable("gpu-a") == "4");
  CHECK(c.allocatable("gpu-b") == "8");

  // Without --all-nodes: refused, each node's slots now and after named.
  Run refused =
      cluster_part(c, {"--variant", "time-slicing", "--replicas", "2"});
  INFO(refused.err);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("--all-nodes") &&
                              Catch::Contains("node gpu-b: nvidia.com/gpu 8 -> "
                                              "nvidia.com/gpu 4 (2 GPU)"));
  Run plan = c.gpunode("server", {"plan", "--scope", "cluster", "--variant",
                                  "time-slicing", "--replicas", "2"});
  INFO(plan.err);
  CHECK_THAT(plan.err, Catch::Contains("node gpu-a: nvidia.com/gpu 4 -> "
                                       "nvidia.com/gpu 2 (1 GPU)"));
  CHECK(c.allocatable("gpu-b") == "8");  // nothing changed

  Run two = cluster_part(
      c, {"--variant", "time-slicing", "--replicas", "2", "--all-nodes"});
  INFO(two.err);
  CHECK(two.exit_code == 0);
  CHECK(c.allocatable("gpu-a") == "2");
  CHECK(c.allocatable("gpu-b") == "4");
  // An agent takes the cluster's settings without being told them.
  Run agent = node_part(c, "gpu-b");
  INFO(agent.err);
  CHECK(agent.exit_code == 0);
  CHECK_THAT(agent.err, Catch::Contains("time-slicing, 2 slot(s) per GPU"));

  Run back = cluster_part(c, {"--all-nodes"});
  INFO(back.err);
  CHECK(back.exit_code == 0);
  CHECK(c.allocatable("gpu-a") == "1");
  CHECK(c.allocatable("gpu-b") == "2");
}

TEST_CASE(
    "many nodes: an agent whose handler is missing stops at that layer, "
    "unlabelled",
    "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimClusterOptions o = four_nodes();
  o.nodes[2].scenario = "agent-no-handler";
  SimCluster c(o);
  REQUIRE(cluster_part(c).exit_code == 0);
  Run agent = node_part(c, "gpu-b");
  INFO(agent.err);
  CHECK(agent.exit_code == 1);
  CHECK_THAT(agent.err, Catch::Contains("[ERROR handler]"));
  CHECK(c.object("/api/v1/nodes/gpu-b")["metadata"]["labels"].value(
            "nvidia.com/gpu.present", "") == "");
}

TEST_CASE(
    "many nodes: the cluster part reports a GPU node held up by its own "
    "layer without waiting it out",
    "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimClusterOptions o = four_nodes();
  o.nodes[2].scenario = "agent-no-handler";
  SimCluster c(o);
  REQUIRE(node_part(c, "gpu-a").exit_code == 1);  // no cluster part yet
  // gpu-b was labelled by hand, but its containerd has no nvidia runtime.
  REQUIRE(c.kubectl({"label", "node", "gpu-b", "nvidia.com/gpu.present=true",
                     "nvidia.com/gpu.count=2"})
              .exit_code == 0);
  const auto start = std::chrono::steady_clock::now();
  Run cluster = c.gpunode(
      "server", {"install", "--scope", "cluster", "--timeout", "40s"});
  const auto took = std::chrono::steady_clock::now() - start;
  INFO(cluster.err);
  CHECK(cluster.exit_code == 1);
  CHECK_THAT(cluster.err, Catch::Contains("node gpu-b: [handler]") &&
                              Catch::Contains("on node gpu-b:"));
  CHECK(took < std::chrono::seconds(30));
  // gpu-a stopped short of its labels: not a GPU node to the cluster part.
  CHECK(cluster.err.find("node gpu-a") == std::string::npos);
}

TEST_CASE("many nodes: kill -9 of an agent's run, then a rerun converges",
          "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  // Before the labels are written, and right after the API took a write.
  for (const std::string point : {"check:labels", "api-write-done"}) {
    SimCluster fresh(four_nodes());
    REQUIRE(cluster_part(fresh).exit_code == 0);
    Run killed = fresh.gpunode("gpu-a",
                               {"install", "--image-archive",
                                fresh.image_archive(), "--timeout", "60s"},
                               {"GPUNODE_TEST_CRASH_AT=" + point});
    INFO(point << "\n" << killed.err);
    CHECK(killed.exit_code == 128 + 9);
    Run rerun = node_part(fresh, "gpu-a");
    INFO(rerun.err);
    CHECK(rerun.exit_code == 0);
    CHECK(fresh.allocatable("gpu-a") == "1");
  }
}

TEST_CASE(
    "many nodes: an agent without the image fetches it from a peer "
    "through the embedded mirror, or is told to bring the archive",
    "[e2e][many-nodes][mirror]") {
  REQUIRE_PARTS();
  for (const bool mirror : {true, false}) {
    SimClusterOptions o = four_nodes();
    for (auto& n : o.nodes) n.embedded_registry_mirror = mirror;
    SimCluster c(o);
    INFO("mirror " << mirror);
    REQUIRE(cluster_part(c).exit_code == 0);
    // gpu-a imports from the stick: with the mirror on, in the shape it
    // serves (a digest reference).
    REQUIRE(node_part(c, "gpu-a").exit_code == 0);
    // gpu-b has no stick.
    Run b = c.gpunode("gpu-b", {"install", "--timeout", "60s"});
    INFO(b.err);
    if (mirror) {
      CHECK(b.exit_code == 0);
      CHECK_THAT(b.err, Catch::Contains("from a peer"));
      CHECK(c.allocatable("gpu-b") == "2");
    } else {
      CHECK(b.exit_code == 1);
      CHECK_THAT(b.err, Catch::Contains("[ERROR image]") &&
                            Catch::Contains("--image-archive"));
      CHECK(c.allocatable("gpu-b").empty());
    }
  }
}

TEST_CASE("many nodes: uninstall on an agent takes only its own part back",
          "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  REQUIRE(cluster_part(c).exit_code == 0);
  REQUIRE(node_part(c, "gpu-a").exit_code == 0);
  REQUIRE(node_part(c, "gpu-b").exit_code == 0);
  Run gone = c.gpunode("gpu-a", {"uninstall"});
  INFO(gone.err);
  CHECK(gone.exit_code == 0);
  CHECK_THAT(gone.err, Catch::Contains("GPU labels removed") &&
                           Catch::Contains("serve every GPU node: kept"));
  const json labels = c.object("/api/v1/nodes/gpu-a")["metadata"]["labels"];
  CHECK_FALSE(labels.contains("nvidia.com/gpu.present"));
  CHECK_FALSE(labels.contains("nvidia.com/gpu.count"));
  CHECK_FALSE(c.object(kDsPath).is_null());
  CHECK(c.allocatable("gpu-b") == "2");
  // Regression (independent try of issue 26): the rerun said "GPU labels
  // removed" again, with nothing there to remove.
  Run again = c.gpunode("gpu-a", {"uninstall"});
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.err, Catch::Contains("gpu-a: no GPU labels of gpunode's"));
  CHECK_THAT(again.err, !Catch::Contains("GPU labels removed"));
}

// Regression (independent try of issue 26): Ansible's state=absent with
// scope=node dropped the scope, since uninstall had no --scope, so a
// server asked for its node part alone took the cluster's objects back.
TEST_CASE("many nodes: uninstall --scope takes back only the part it names",
          "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  REQUIRE(cluster_part(c).exit_code == 0);
  REQUIRE(node_part(c, "gpu-a").exit_code == 0);

  Run bad = c.gpunode("server", {"uninstall", "--scope", "nodes"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--scope: 'nodes' is not one of node, "
                                      "cluster, both"));
  CHECK_FALSE(c.object(kDsPath).is_null());

  // Regression (independent try of issue 26): the node part took the
  // kubelet's kubeconfig over --kubeconfig, so a wrong one went unnoticed
  // and the labels went.
  {
    const std::string garbage = "/etc/gpunode-garbage.yaml";
    write_text(c.node("gpu-a").root + garbage, "garbage: [\n");
    Run wrong = c.gpunode("gpu-a", {"uninstall", "--scope", "node",
                                    "--keep-image", "--kubeconfig", garbage});
    INFO(wrong.err);
    CHECK(wrong.exit_code == 2);
    CHECK_THAT(wrong.err, Catch::Contains(garbage + ": is not valid YAML"));
    const json kept = c.object("/api/v1/nodes/gpu-a")["metadata"]["labels"];
    CHECK(kept.value("nvidia.com/gpu.present", "") == "true");
    // A path that is not there: the fix names the flag given, and no site
    // setting (there is none for the kubeconfig).
    Run missing = c.gpunode("gpu-a", {"uninstall", "--scope", "node",
                                      "--kubeconfig", "/etc/nope.yaml"});
    CHECK(missing.exit_code != 0);
    CHECK_THAT(missing.err,
               Catch::Contains(
                   "check the path given as the kubeconfig (--kubeconfig);") &&
                   !Catch::Contains("site setting"));
    // An agent's uninstall of both parts: the fix is this command's scope,
    // not an install.
    Run both = c.gpunode("gpu-a", {"uninstall", "--scope", "both"});
    CHECK(both.exit_code == 1);
    CHECK_THAT(both.err, Catch::Contains("rerun with --scope node") &&
                             !Catch::Contains("gpunode install --scope node"));
    CHECK(c.object("/api/v1/nodes/gpu-a")["metadata"]["labels"].value(
              "nvidia.com/gpu.present", "") == "true");
  }

  // The server's node part: the cluster's objects stay.
  Run node = c.gpunode("server", {"uninstall", "--scope", "node"});
  INFO(node.err);
  CHECK(node.exit_code == 0);
  CHECK_THAT(node.err, Catch::Contains("serve every GPU node: kept"));
  CHECK_FALSE(c.object(kDsPath).is_null());
  CHECK(c.allocatable("gpu-a") == "1");

  // The cluster part: the DaemonSet goes; each node's labels stay, and so
  // do this host's images (they are the node part's).
  Run cluster = c.gpunode("server", {"uninstall", "--scope", "cluster"});
  INFO(cluster.err);
  CHECK(cluster.exit_code == 0);
  CHECK_THAT(cluster.err,
             Catch::Contains("DaemonSet kube-system/"
                             "nvidia-device-plugin-daemonset: removed") &&
                 Catch::Contains("each GPU node's own labels") &&
                 !Catch::Contains("image "));
  CHECK(c.object(kDsPath).is_null());
  const json labels = c.object("/api/v1/nodes/gpu-a")["metadata"]["labels"];
  CHECK(labels.value("nvidia.com/gpu.present", "") == "true");
}

// Regression (independent try of issue 26): a site default (config.toml,
// GPUNODE_*) on an agent was taken as a request to change the cluster, so
// every agent of a site whose config.toml said time-slicing was blocked
// under a renamed cluster, told to drop flags it never gave. A site default
// gives way to the cluster's settings, with a warning; a flag still asks.
TEST_CASE(
    "many nodes: an agent's site default gives way to the cluster's "
    "settings",
    "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimClusterOptions o;
  o.nodes = {{"server", true, 0, "cpu-server"}, {"gpu-a", false, 1, ""}};
  SimCluster c(o);
  REQUIRE(cluster_part(c, {"--variant", "time-slicing", "--replicas", "2",
                           "--rename-shared"})
              .exit_code == 0);
  const std::string site = c.node("gpu-a").root + "/etc/gpunode/config.toml";
  write_text(site, "variant = \"time-slicing\"\nreplicas = 2\n");
  Run by_site = node_part(c, "gpu-a", {"--json"});
  INFO(by_site.err);
  CHECK(by_site.exit_code == 0);
  const json warnings = stage_events(by_site)["plugin"]["warnings"];
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0].get<std::string>(),
             Catch::StartsWith("the site default (") &&
                 Catch::Contains("/etc/gpunode/config.toml:1") &&
                 Catch::Contains("this node takes the cluster's"));
  CHECK(c.allocatable("gpu-a", "nvidia.com/gpu.shared") == "2");
  // The same asked by a flag is a request the node cannot make.
  Run by_flag = node_part(c, "gpu-a", {"--variant", "time-slicing"});
  CHECK(by_flag.exit_code == 1);
  CHECK_THAT(by_flag.err,
             Catch::Contains("rerun here without --variant/--replicas/"
                             "--rename-shared"));
}

TEST_CASE(
    "many nodes: the summary counts the stages a part checked, and the "
    "skipped ones apart",
    "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimClusterOptions o;
  o.nodes = {{"server", true, 0, "cpu-server"}, {"gpu-a", false, 1, ""}};
  SimCluster c(o);
  // The independent try of issue 26 read "9 stage(s) checked" from a part
  // that checked 5 of them.
  for (const std::string node : {"server", "gpu-a"}) {
    Run r = node == "server" ? cluster_part(c, {"--json"})
                             : node_part(c, node, {"--json"});
    INFO(node << "\n" << r.err);
    REQUIRE(r.exit_code == 0);
    const json result = stage_events(r)["result"];
    std::size_t checked = 0, skipped = 0;
    for (const auto& s : result["stages"])
      (s["status"] == "skipped" ? skipped : checked) += 1;
    // The cluster part skips the host layers; the node part runs a part of
    // every stage but smoke, which it leaves out of the list.
    CHECK((node == "server") == (skipped > 0));
    REQUIRE(checked > 0);
    const std::string summary = result["summary"];
    CHECK_THAT(summary, Catch::StartsWith(std::to_string(checked) +
                                          " stage(s) checked"));
    if (skipped > 0)
      CHECK_THAT(summary,
                 Catch::EndsWith(", " + std::to_string(skipped) + " skipped"));
    else
      CHECK_THAT(summary, !Catch::Contains("skipped"));
  }
}

// Regression (independent try of issue 26): a mistyped --node on an agent
// was told to use the admin kubeconfig, when the kubelet's own identity is
// right and the name is wrong.
TEST_CASE("many nodes: an agent given another node's name is told its own",
          "[e2e][many-nodes]") {
  REQUIRE_PARTS();
  SimCluster c(four_nodes());
  REQUIRE(cluster_part(c).exit_code == 0);
  Run r = node_part(c, "gpu-a", {"--node", "gpu-b"});
  INFO(r.err);
  // Found by preflight, before any layer changes (the independent try of
  // issue 26 saw the image imported first).
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("[ERROR preflight]"));
  CHECK_THAT(r.err, !Catch::Contains("applied"));
  CHECK_THAT(r.err, Catch::Contains("this host's kubelet is the Node gpu-a") &&
                        Catch::Contains("rerun with --node gpu-a"));
  CHECK_THAT(r.err, !Catch::Contains("admin's kubeconfig"));
  const json labels = c.object("/api/v1/nodes/gpu-b")["metadata"]["labels"];
  CHECK_FALSE(labels.contains("nvidia.com/gpu.present"));
}
