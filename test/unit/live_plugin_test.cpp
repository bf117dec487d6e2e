// What the cluster's device plugin runs, read with the node's identity
// (plugin/live_plugin.cpp): the Node authorizer's lag behind a new pod.
#include "plugin/live_plugin.hpp"

#include <catch2/catch.hpp>
#include <chrono>

#include "cluster_bed.hpp"
#include "plugin/device_plugin_plan.hpp"

namespace gpunode {
namespace {

using test::KubeVerb;

std::size_t configmap_reads(test::ClusterBed& bed) {
  std::size_t n = 0;
  for (const auto& r : bed.kube().requests())
    n += r.verb == KubeVerb::kGet && r.path == configmap_path();
  return n;
}

// Regression (the real tier, TestRealManyNodes under load): a kubelet's
// read of the ConfigMap right after its plugin pod came was refused (403),
// since the Node authorizer links the pod to the ConfigMap a moment later,
// and the agent's install ended blocked.
TEST_CASE(
    "live plugin: a kubelet's refused ConfigMap read is asked again for a "
    "few seconds, an admin's counts at once",
    "[plugin][live-plugin]") {
  test::ClusterBed bed;
  bed.sharing(Variant::kTimeSlicing, 4);
  bed.plugin_applied();
  bed.plugin_pods({test::PluginPod{}});
  bed.kube().answer_status(KubeVerb::kGet, configmap_path(), 403,
                           "configmaps \"nvidia-device-plugin-config\" is "
                           "forbidden: no relationship found");
  const auto start = bed.clock().steady_now();
  auto node = read_node_plugin(bed.kube(), bed.node(), bed.clock(),
                               start + std::chrono::minutes(1));
  REQUIRE_FALSE(node);
  CHECK(node.error().status == 403);
  const auto waited = bed.clock().steady_now() - start;
  CHECK(waited >= std::chrono::seconds(4));
  CHECK(waited <= std::chrono::seconds(5));
  CHECK(configmap_reads(bed) >= 10);

  const std::size_t before = configmap_reads(bed);
  auto admin = read_cluster_plugin(bed.kube(), start + std::chrono::minutes(1));
  REQUIRE_FALSE(admin);
  CHECK(configmap_reads(bed) == before + 1);
}

}  // namespace
}  // namespace gpunode
