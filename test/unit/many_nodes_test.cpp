// Roles on a cluster of many nodes, against a FakeKubeClient: the scope a
// host's role gives, the kubeconfig each scope uses, the GPU labels, the
// node part's read-only view of what the cluster part made, the cluster
// part's care for the other GPU nodes (--all-nodes, labelling the nodes
// that serve GPUs before the DaemonSet's affinity), and the wait over every
// GPU node.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "cluster_bed.hpp"
#include "gpunode/system_host.hpp"
#include "k3s_sim.hpp"
#include "plugin/gpu_labels.hpp"
#include "plugin/live_plugin.hpp"
#include "run/cluster_facts.hpp"
#include "run/host_role.hpp"
#include "stages/stages.hpp"

namespace gpunode {
namespace {

using kube::json;
using test::any_contains;
using test::ClusterBed;
using test::KubeVerb;
using test::PluginPod;
using test::TempDir;
using test::WatchStream;

// A node of the cluster other than the bed's own.
json other_node(const std::string& name, std::optional<int> gpus,
                long long advertises,
                const std::string& resource = "nvidia.com/gpu") {
  json labels = json::object();
  if (gpus) {
    labels[kGpuPresentLabel] = "true";
    labels[kGpuCountLabel] = std::to_string(*gpus);
  }
  json alloc = json::object();
  if (advertises > 0) alloc[resource] = std::to_string(advertises);
  return {{"metadata", {{"name", name}, {"labels", labels}}},
          {"status", {{"allocatable", alloc}, {"capacity", alloc}}}};
}

json labelled_self(ClusterBed& bed, long long advertises) {
  json self = bed.node_object({{"nvidia.com/gpu", advertises}});
  self["metadata"]["labels"][kGpuPresentLabel] = "true";
  self["metadata"]["labels"][kGpuCountLabel] = "1";
  return self;
}

// A file under a scratch root, its folders made.
void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(
      std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

}  // namespace

// ---- roles and scopes ----

TEST_CASE("the host's role decides the default scope and the kubeconfig",
          "[many-nodes][role]") {
  TempDir root;
  auto fs = make_rooted_file_system(root.path());
  Options opts;
  SECTION("no k3s unit: both parts, k3s's admin kubeconfig") {
    CHECK(find_host_role(*fs) == HostRole::kNone);
    CHECK(default_scope(opts, HostRole::kNone) == Scope::kBoth);
    CHECK(kubeconfig_for(opts, Scope::kBoth) == kAdminKubeconfig);
  }
  SECTION("a server: both parts") {
    write_file(root.path() + "/etc/systemd/system/k3s.service", "[Unit]\n");
    CHECK(find_host_role(*fs) == HostRole::kServer);
    CHECK(default_scope(opts, HostRole::kServer) == Scope::kBoth);
  }
  SECTION("an agent: the node part, with the kubelet's own kubeconfig") {
    write_file(root.path() + "/lib/systemd/system/k3s-agent.service",
               "[Unit]\n");
    CHECK(find_host_role(*fs) == HostRole::kAgent);
    CHECK(default_scope(opts, HostRole::kAgent) == Scope::kNode);
    CHECK(kubeconfig_for(opts, Scope::kNode) == kKubeletKubeconfig);
    CHECK(std::string(kKubeletKubeconfig) ==
          "/var/lib/rancher/k3s/agent/kubelet.kubeconfig");
  }
  SECTION("an agent given an admin kubeconfig does both, as before") {
    opts.kubeconfig = "/root/admin.yaml";
    opts.kubeconfig_given = true;
    CHECK(default_scope(opts, HostRole::kAgent) == Scope::kBoth);
    CHECK(kubeconfig_for(opts, Scope::kNode) == "/root/admin.yaml");
  }
  SECTION("--scope wins") {
    opts.scope = Scope::kCluster;
    CHECK(default_scope(opts, HostRole::kAgent) == Scope::kCluster);
    CHECK(kubeconfig_for(opts, Scope::kCluster) == kAdminKubeconfig);
  }
  CHECK(parse_scope("node") == Scope::kNode);
  CHECK(parse_scope("cluster") == Scope::kCluster);
  CHECK(parse_scope("both") == Scope::kBoth);
  CHECK_FALSE(parse_scope("all"));
  CHECK_FALSE(parse_scope("Node"));
}

TEST_CASE(
    "an agent's kubelet client key missing or mismatched: the fix names the "
    "kubelet's files and k3s-agent, never k3s.yaml",
    "[many-nodes][role]") {
  TempDir root;
  test::make_host_tree(root.path(), "good-v3");
  test::SimOptions o;
  o.root = root.path();
  test::K3sSim sim(o);
  sim.write_kubelet_credentials("gpu-node-1", root.path());
  const std::string key =
      root.path() + "/var/lib/rancher/k3s/agent/client-kubelet.key";
  auto host = make_system_host(root.path());
  auto connect = [&] {
    std::vector<std::pair<std::string, std::string>> warnings;
    auto r = connect_cluster(*host, kKubeletKubeconfig, Scope::kNode, warnings);
    CHECK(warnings.empty());
    return r;
  };
  REQUIRE(connect());
  auto check_fix = [](const Error& e) {
    INFO(e.message << " / " << e.fix);
    CHECK(e.layer == "kubeconfig");
    CHECK_THAT(e.fix, Catch::Contains("client-kubelet.key") &&
                          Catch::Contains("/var/lib/rancher/k3s/agent/") &&
                          Catch::Contains("sudo systemctl restart k3s-agent"));
    CHECK_THAT(e.fix, !Catch::Contains("k3s.yaml"));
  };
  SECTION("missing") {
    REQUIRE(std::filesystem::remove(key));
    auto r = connect();
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("client-kubelet.key"));
    check_fix(r.error());
  }
  SECTION("another node's") {
    TempDir other;
    sim.write_kubelet_credentials("gpu-b", other.path());
    std::filesystem::copy_file(
        other.path() + "/var/lib/rancher/k3s/agent/client-kubelet.key", key,
        std::filesystem::copy_options::overwrite_existing);
    auto r = connect();
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message,
               Catch::Contains("does not belong to the client certificate"));
    check_fix(r.error());
  }
}

// ---- GPU labels ----

TEST_CASE("GPU labels follow GFD's names and Kubernetes' value rules",
          "[many-nodes][labels]") {
  GpuInventory inv;
  GpuInfo g;
  g.name = "NVIDIA H200";
  g.memory_mib = 143771;
  inv.gpus = {g, g};
  const auto labels = gpu_labels_for(inv);
  CHECK(labels == std::map<std::string, std::string>{
                      {"nvidia.com/gpu.count", "2"},
                      {"nvidia.com/gpu.memory", "143771"},
                      {"nvidia.com/gpu.present", "true"},
                      {"nvidia.com/gpu.product", "NVIDIA-H200"}});
  CHECK(label_value("NVIDIA A100-SXM4-80GB (rev a1)") ==
        "NVIDIA-A100-SXM4-80GB--rev-a1");
  CHECK(label_value(std::string(80, 'x')).size() == 63);
  CHECK(label_value("--x--") == "x");
  CHECK(label_value("\x1b[2J") == "2J");
}

TEST_CASE("the DaemonSet selects GPU nodes, keeping an affinity it has",
          "[many-nodes][labels]") {
  json spec = json::object();
  CHECK_FALSE(selects_gpu_nodes(spec));
  require_gpu_nodes(spec);
  CHECK(selects_gpu_nodes(spec));
  const json once = spec;
  require_gpu_nodes(spec);
  CHECK(spec == once);  // idempotent

  json other = {
      {"affinity",
       {{"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution",
           {{"nodeSelectorTerms",
             json::array(
                 {{{"matchExpressions", json::array({{{"key", "zone"},
                                                      {"operator", "In"},
                                                      {"values", {"a"}}}})}},
                  {{"matchExpressions",
                    json::array({{{"key", "zone"},
                                  {"operator", "In"},
                                  {"values", {"b"}}}})}}})}}}}}}}};
  CHECK_FALSE(selects_gpu_nodes(other));
  require_gpu_nodes(other);
  CHECK(selects_gpu_nodes(other));
  const json terms = other["affinity"]["nodeAffinity"]
                          ["requiredDuringSchedulingIgnoredDuringExecution"]
                          ["nodeSelectorTerms"];
  REQUIRE(terms.size() == 2);
  CHECK(terms[0]["matchExpressions"].size() == 2);
  CHECK(terms[0]["matchExpressions"][0]["key"] == "zone");

  // Both platform manifests, as planned, carry it.
  for (Variant v : {Variant::kDefault, Variant::kTimeSlicing}) {
    Sharing s;
    s.variant = v;
    s.replicas = v == Variant::kDefault ? 1 : 4;
    auto plan =
        plan_device_plugin(s, "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
    REQUIRE(plan);
    CHECK(selects_gpu_nodes(plan->daemonset["spec"]["template"]["spec"]));
  }
}

TEST_CASE("the labels stage labels this node from the driver's count",
          "[many-nodes][labels]") {
  ClusterBed bed(2);
  bed.node_advertises({});
  auto stage = make_labels_stage();
  Check c = stage->check(bed.context());
  REQUIRE(c.status == CheckStatus::kNeeded);
  CHECK(c.code == "labels.apply");
  CHECK_THAT(c.action, Catch::Contains("nvidia.com/gpu.count=2") &&
                           Catch::Contains("nvidia.com/gpu.present=true"));
  CHECK(c.facts["labels"][3] == json{{"name", "nvidia.com/gpu.product"},
                                     {"value", "NVIDIA-H100-80GB-HBM3"},
                                     {"set", false}});
  CHECK(bed.kube().writes().empty());
  REQUIRE(stage->apply(bed.context(), c));
  const auto writes = bed.kube().writes();
  REQUIRE(writes.size() == 1);
  CHECK(writes[0].line() == "APPLY " + bed.node_path());
  CHECK(writes[0].body["metadata"]["labels"]["nvidia.com/gpu.count"] == "2");
  // Only the labels, the GPUs' UUIDs (the proof's): server-side apply
  // leaves the rest of the Node alone.
  CHECK(writes[0].body["metadata"].size() == 3);
  // ... and the node's evidence key, made by this first apply.
  CHECK(writes[0].body["metadata"]["annotations"].size() == 2);
  CHECK(writes[0].body["metadata"]["annotations"].contains(
      "gpunode.io/gpu-uuids"));
  CHECK(writes[0].body["metadata"]["annotations"].contains(
      "gpunode.io/evidence-key"));
  CHECK_FALSE(writes[0].body.contains("status"));

  SECTION("a labelled node is satisfied, with nothing written") {
    bed.new_run();
    Check again = stage->check(bed.context());
    CHECK(again.status == CheckStatus::kSatisfied);
    CHECK(again.code == "labels.ok");
    CHECK(bed.kube().writes().size() == 1);
  }
  SECTION("a count that changed is relabelled, naming the old value") {
    json node = *bed.kube().stored(bed.node_path());
    node["metadata"]["labels"]["nvidia.com/gpu.count"] = "8";
    bed.kube().put(bed.node_path(), node);
    bed.new_run();
    Check again = stage->check(bed.context());
    CHECK(again.status == CheckStatus::kNeeded);
    CHECK_THAT(again.action, Catch::Contains("nvidia.com/gpu.count=2 (now 8)"));
  }
}

TEST_CASE("the labels stage names a node the cluster does not know",
          "[many-nodes][labels]") {
  ClusterBed bed;
  bed.node_missing({"gpu-a", "gpu-b"});
  Check c = make_labels_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "labels.no-node");
  CHECK(c.exit == ExitCode::kUsage);
  CHECK_THAT(c.summary, Catch::Contains("gpu-a, gpu-b"));
}

// ---- the node part: read-only ----

TEST_CASE("node part: a missing RuntimeClass is the cluster part's",
          "[many-nodes][node-part]") {
  ClusterBed bed;
  bed.opts.scope = Scope::kNode;
  bed.kube().put_absent("/apis/node.k8s.io/v1/runtimeclasses/nvidia");
  Check c = make_runtimeclass_stage()->check(bed.context());
  CHECK(c.status == CheckStatus::kBlocked);
  CHECK(c.code == "runtimeclass.cluster-part");
  CHECK_THAT(c.fix, Catch::Contains("sudo gpunode install --scope cluster"));
  CHECK(bed.kube().writes().empty());
}

TEST_CASE("node part: the plugin as its pod on this node shows it",
          "[many-nodes][node-part]") {
  ClusterBed bed;
  bed.opts.scope = Scope::kNode;
  auto stage = make_plugin_stage();
  CHECK_FALSE(stage->writes_only_cluster_objects(Scope::kNode));
  CHECK(stage->writes_only_cluster_objects(Scope::kBoth));

  SECTION("no pod yet: it waits for one, and says the cluster part may lack") {
    bed.plugin_pods({});
    Check c = stage->check(bed.context());
    REQUIRE(c.status == CheckStatus::kNeeded);
    CHECK(c.code == "plugin.no-pod");
    REQUIRE(c.details.size() == 1);
    CHECK_THAT(c.details[0], Catch::Contains("--scope cluster"));
    SECTION("none comes: blocked with the cluster part's command") {
      bed.kube().answer_watch("/api/v1/namespaces/kube-system/pods",
                              WatchStream{});
      auto r = stage->apply(bed.context(), c);
      REQUIRE_FALSE(r);
      CHECK(r.error().exit == ExitCode::kBlocked);
      CHECK_THAT(r.error().message,
                 Catch::Contains("no device plugin pod came"));
      CHECK_THAT(r.error().fix, Catch::Contains("--scope cluster"));
    }
    SECTION("one comes") {
      WatchStream s;
      s.events.push_back({"ADDED", bed.pod_object(PluginPod{})});
      bed.kube().answer_watch("/api/v1/namespaces/kube-system/pods", s);
      CHECK(stage->apply(bed.context(), c));
    }
    CHECK(bed.kube().writes().empty());
  }
  SECTION("time-slicing read from the ConfigMap its pod mounts") {
    bed.sharing(Variant::kTimeSlicing, 4);
    bed.plugin_applied();
    bed.plugin_pods({PluginPod{}});
    bed.opts.sharing = Sharing{};  // the node named none: it takes these
    Check c = stage->check(bed.context());
    CHECK(c.status == CheckStatus::kSatisfied);
    CHECK(c.code == "plugin.ok");
    CHECK_THAT(c.summary,
               Catch::Contains("the cluster runs time-slicing, 4 slot(s) per "
                               "GPU as nvidia.com/gpu"));
    CHECK(c.facts["cluster_plugin"]["replicas"] == 4);
    // The node never asks for what its identity may not read.
    CHECK(bed.kube().count(KubeVerb::kGet, daemonset_path()) == 0);
    CHECK(bed.kube().count(KubeVerb::kList, "/apis/apps/v1/daemonsets") == 0);
    auto plan = bed.context().plugin_plan();
    REQUIRE(plan);
    CHECK((*plan)->replicas == 4);
  }
  SECTION("settings asked for that differ from the cluster's are refused") {
    bed.plugin_applied();  // default variant
    bed.plugin_pods({PluginPod{}});
    bed.opts.sharing.variant = Variant::kTimeSlicing;
    bed.opts.sharing.replicas = 2;
    bed.opts.sharing_given = true;
    Check c = stage->check(bed.context());
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "plugin.cluster-settings");
    CHECK_THAT(c.fix, Catch::Contains("--scope cluster --all-nodes --variant "
                                      "time-slicing --replicas 2"));
  }
}

TEST_CASE("node part: the plan is known only once its pod is, flags or not",
          "[many-nodes][node-part]") {
  ClusterBed bed;
  bed.opts.scope = Scope::kNode;
  bed.opts.sharing_given = GENERATE(false, true);
  bed.plugin_pods({});
  auto before = bed.context().plugin_plan();
  REQUIRE_FALSE(before);
  CHECK_THAT(before.error().message,
             Catch::Contains("no device plugin pod runs on this node yet"));
  // The pod came (the DaemonSet followed the label): not remembered as
  // missing, and its config digest is the live one.
  bed.plugin_applied();
  PluginPod pod;
  pod.config_hash = "digest-of-another-bundle";
  bed.plugin_pods({pod});
  auto after = bed.context().plugin_plan();
  REQUIRE(after);
  CHECK((*after)->config_hash == plugin_config_hash(nullptr));
}

TEST_CASE("live settings: a ConfigMap the pods mount but that is gone",
          "[many-nodes][node-part]") {
  json spec = {{"volumes",
                json::array({{{"name", "plugin-config"},
                              {"configMap", {{"name", kPluginConfigMap}}}}})}};
  auto s = sharing_of(spec, std::nullopt);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().message, Catch::Contains("it is gone"));
  auto bad =
      sharing_of(spec, json{{"data", {{"config.yaml", "version: v1\n"}}}});
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("shares no nvidia.com/gpu"));
  auto plain = sharing_of(json::object(), std::nullopt);
  REQUIRE(plain);
  CHECK(plain->variant == Variant::kDefault);
}

// ---- the cluster part: every GPU node ----

TEST_CASE("cluster part: a change of settings on other nodes needs --all-nodes",
          "[many-nodes][cluster-part]") {
  ClusterBed bed;
  bed.plugin_applied();  // default variant, as the cluster runs it
  bed.other_daemonsets({});
  bed.kube().answer_list("/api/v1/nodes",
                         {labelled_self(bed, 1), other_node("gpu-b", 2, 2)});
  bed.kube().put(bed.node_path(), labelled_self(bed, 1));
  bed.sharing(Variant::kTimeSlicing, 4);
  auto stage = make_plugin_stage();
  SECTION("install without it is blocked, listing each node") {
    Check c = stage->check(bed.context());
    CHECK(c.status == CheckStatus::kBlocked);
    CHECK(c.code == "plugin.all-nodes");
    CHECK_THAT(c.summary, Catch::Contains("1 GPU node(s) besides this one "
                                          "(gpu-b)"));
    CHECK_THAT(c.fix, Catch::Contains("--all-nodes"));
    REQUIRE(c.details.size() == 2);
    CHECK(c.details[1] ==
          "node gpu-b: nvidia.com/gpu 2 -> nvidia.com/gpu 8 (2 GPU)");
    CHECK(c.facts["nodes"][1]["after"]["count"] == 8);
  }
  SECTION("plan shows it, and says install needs --all-nodes") {
    bed.dry_run_writes();
    Check c = stage->check(bed.context());
    CHECK(c.status == CheckStatus::kNeeded);
    CHECK(any_contains(c.warnings, "install needs --all-nodes"));
    CHECK(any_contains(c.details,
                       "node gpu-node-1 (this node): nvidia.com/gpu 1 -> "
                       "nvidia.com/gpu 4 (1 GPU)"));
  }
  SECTION("with it, the plugin is applied") {
    bed.opts.all_nodes = true;
    Check c = stage->check(bed.context());
    CHECK(c.status == CheckStatus::kNeeded);
    REQUIRE(stage->apply(bed.context(), c));
    CHECK(bed.kube().write_lines() ==
          std::vector<std::string>{"APPLY " + configmap_path(),
                                   "APPLY " + daemonset_path()});
  }
}

TEST_CASE("cluster part: nodes serving GPUs are labelled before the affinity",
          "[many-nodes][cluster-part]") {
  ClusterBed bed;
  bed.plugin_absent();
  // Applied by an earlier gpunode: no node affinity yet.
  json old = bed.rendered().daemonset;
  old["spec"]["template"]["spec"].erase("affinity");
  bed.kube().put(daemonset_path(), old);
  bed.other_daemonsets({});
  bed.kube().answer_list(
      "/api/v1/nodes",
      {labelled_self(bed, 1), other_node("gpu-old", std::nullopt, 1),
       other_node("cpu-1", std::nullopt, 0)});
  bed.kube().put(bed.node_path(), labelled_self(bed, 1));
  auto stage = make_plugin_stage();
  Check c = stage->check(bed.context());
  REQUIRE(c.status == CheckStatus::kNeeded);
  CHECK_THAT(c.action, Catch::StartsWith("label node(s) gpu-old "
                                         "nvidia.com/gpu.present=true first"));
  REQUIRE(stage->apply(bed.context(), c));
  const auto writes = bed.kube().writes();
  REQUIRE(writes.size() == 2);
  CHECK(writes[0].line() == "APPLY /api/v1/nodes/gpu-old");
  CHECK(writes[0].body["metadata"]["labels"] ==
        json{{"nvidia.com/gpu.present", "true"}});
  CHECK(writes[1].line() == "APPLY " + daemonset_path());
}

TEST_CASE("cluster part: the wait covers every labelled GPU node",
          "[many-nodes][cluster-part]") {
  ClusterBed bed;
  bed.opts.scope = Scope::kCluster;
  bed.plugin_applied();
  bed.plugin_pods({});
  auto stage = make_allocatable_stage();
  SECTION("no GPU node yet: satisfied, saying what to run") {
    Check c = stage->check(bed.context());
    CHECK(c.status == CheckStatus::kSatisfied);
    CHECK(c.code == "allocatable.no-gpu-nodes");
    CHECK(any_contains(c.warnings, "run gpunode install on each GPU node"));
  }
  SECTION("two nodes: per node expected and advertised, short ones named") {
    const json a = other_node("gpu-a", 1, 1), b = other_node("gpu-b", 2, 0);
    bed.kube().answer_list("/api/v1/nodes",
                           {a, b, other_node("gpu-x", std::nullopt, 4)});
    bed.kube().put("/api/v1/nodes/gpu-a", a);
    bed.kube().put("/api/v1/nodes/gpu-b", b);
    json pod_a = bed.pod_object(PluginPod{});
    pod_a["spec"]["nodeName"] = "gpu-a";
    // Over many nodes the plugin's pods are one list, not one a node.
    bed.kube().answer_list(
        "/api/v1/namespaces/kube-system/pods?labelSelector=name%3Dnvidia-"
        "device-plugin-ds",
        {pod_a});
    bed.kube().answer_list(
        "/api/v1/namespaces/kube-system/events?fieldSelector=involvedObject."
        "name%3Dnvidia-device-plugin-daemonset",
        {});
    Check c = stage->check(bed.context());
    CHECK(c.status == CheckStatus::kNeeded);
    CHECK_THAT(c.summary,
               Catch::Contains("1 of 2 GPU node(s) short") &&
                   Catch::Contains("node gpu-b advertises "
                                   "nvidia.com/gpu: none, not yet 2"));
    // Lists, and nothing a node: the plugin's pods twice (which nodes serve
    // GPUs, plugin/gpu_nodes.cpp; then the pass's look at them).
    CHECK(bed.kube().count(KubeVerb::kGet, "/api/v1/nodes/gpu-a") == 0);
    CHECK(bed.kube().count(KubeVerb::kGet, "/api/v1/nodes/gpu-b") == 0);
    CHECK(bed.kube().count(KubeVerb::kList, bed.plugin_pods_path()) == 0);
    CHECK(bed.kube().count(KubeVerb::kList,
                           "/api/v1/namespaces/kube-system/pods?labelSelector="
                           "name%3Dnvidia-device-plugin-ds") == 2);
    REQUIRE(c.details.size() == 1);
    CHECK_THAT(c.details[0], Catch::StartsWith("gpu-b: [plugin] no device "
                                               "plugin pod is scheduled"));
    CHECK(c.facts["nodes"][0]["ok"] == true);
    CHECK(c.facts["nodes"][1]["expected"] == 2);
    CHECK(c.facts["nodes"][1]["advertised"].is_null());
    // gpu-x serves GPUs but has no count: named, not guessed.
    CHECK(any_contains(c.warnings, "node gpu-x serves or is labelled"));
  }
}

}  // namespace gpunode
