// The run's facts behind memoized accessors (gpunode/context.hpp): each is
// made once, errors included, and no stage's check() is needed to get one.
#include "gpunode/context.hpp"

#include <catch2/catch.hpp>

#include "gpu/gpu_probe.hpp"
#include "host_bed.hpp"
#include "plugin/device_plugin_plan.hpp"
#include "test_support.hpp"

using namespace gpunode;

namespace {

// A bare root named Gpu-Node-7 (the one host bed).
struct Bed : test::HostBed {
  Bed() : HostBed("", nullptr, "Gpu-Node-7") {}
};

}  // namespace

TEST_CASE("context: the device plugin plan is rendered once per run",
          "[context]") {
  Bed bed;
  bed.opts.sharing = *parse_sharing("time-slicing", 4, false).sharing;
  bed.opts.image_ref = "registry.local/plugin:v1";
  Context ctx(bed.host, bed.opts, bed.clock.steady_now());
  auto first = ctx.plugin_plan();
  auto again = ctx.plugin_plan();
  REQUIRE(first.ok());
  REQUIRE(again.ok());
  CHECK(*first == *again);  // the same object: not rendered again
  CHECK((*first)->replicas == 4);
  CHECK((*first)->slots_for(3) == 12);
  CHECK((*first)->image == "registry.local/plugin:v1");
  CHECK((*first)->manifests_origin == "built-in");
  REQUIRE((*first)->configmap);
}

TEST_CASE("context: the node name is found once, from the host name",
          "[context]") {
  Bed bed;
  Context ctx(bed.host, bed.opts, bed.clock.steady_now());
  auto name = ctx.node();
  REQUIRE(name.ok());
  CHECK(*name == "gpu-node-7");  // k3s lower-cases the host name
}

TEST_CASE("context: without a driver, gpus() says why, from the probe",
          "[context]") {
  Bed bed;
  Context ctx(bed.host, bed.opts, bed.clock.steady_now());
  auto gpus = ctx.gpus();
  REQUIRE_FALSE(gpus.ok());
  CHECK(gpus.error().layer == "driver");
  CHECK_THAT(gpus.error().message,
             Catch::Contains("the NVIDIA kernel module is not loaded"));
  CHECK(&ctx.gpu_probe() == &ctx.gpu_probe());
  REQUIRE(ctx.gpu_probe().failure);
  CHECK(ctx.gpu_probe().failure->code == "driver.module-not-loaded");
}

TEST_CASE("context: known facts are used instead of found", "[context]") {
  Bed bed;
  KnownFacts known;
  known.node = "given";
  known.gpus = GpuInventory{"NVML", "580.1", {GpuInfo{}, GpuInfo{}}};
  Context ctx(bed.host, bed.opts, bed.clock.steady_now(), known);
  CHECK(*ctx.node() == "given");
  auto gpus = ctx.gpus();
  REQUIRE(gpus.ok());
  CHECK((*gpus)->gpus.size() == 2);
}

TEST_CASE("context: a cluster marked down answers its error at once",
          "[context]") {
  Bed bed;
  bed.opts.kubeconfig = "/etc/rancher/k3s/k3s.yaml";  // not in the tree
  Context ctx(bed.host, bed.opts, bed.clock.steady_now());
  auto first = ctx.cluster();
  REQUIRE_FALSE(first.ok());
  const Error down{ExitCode::kBlocked, "cluster", "no answer", "start k3s"};
  ctx.mark_cluster_down(down);
  auto again = ctx.cluster();
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message == "no answer");
}
