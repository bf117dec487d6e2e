// The dry-run client (kube/dry_run_client.hpp): every write goes out with
// dryRun=All, every read as it is; what plan, --dry-run and status use.
#include "kube/dry_run_client.hpp"

#include <catch2/catch.hpp>

#include "fake_kube_client.hpp"

using namespace gpunode;
using namespace gpunode::test;

TEST_CASE("dry-run client: writes carry dryRun=All, reads pass through",
          "[kube][dry-run]") {
  FakeClock clock;
  auto fake = std::make_shared<FakeKubeClient>(clock);
  fake->put("/api/v1/nodes/n", kube::json{{"kind", "Node"}});
  fake->answer_list("/api/v1/pods", {});
  fake->answer_text("/api/v1/namespaces/d/pods/p/log", "hello");
  auto dry = kube::make_dry_run_client(fake);
  const auto deadline = clock.steady_now() + std::chrono::seconds(5);
  const kube::json cm{{"apiVersion", "v1"},
                      {"kind", "ConfigMap"},
                      {"metadata", {{"name", "c"}, {"namespace", "d"}}}};

  REQUIRE(dry->get("/api/v1/nodes/n", deadline).ok());
  REQUIRE(dry->list("/api/v1/pods", deadline).ok());
  REQUIRE(dry->get_text("/api/v1/namespaces/d/pods/p/log", deadline).ok());
  REQUIRE(dry->apply("/api/v1/namespaces/d/configmaps/c", cm, deadline).ok());
  REQUIRE(
      dry->create("/api/v1/namespaces/d/configmaps?x=1", cm, deadline).ok());
  REQUIRE(dry->remove("/api/v1/namespaces/d/configmaps/c", deadline).ok());

  CHECK(fake->write_lines() ==
        std::vector<std::string>{
            "APPLY /api/v1/namespaces/d/configmaps/c?dryRun=All",
            "CREATE /api/v1/namespaces/d/configmaps?x=1&dryRun=All",
            "DELETE /api/v1/namespaces/d/configmaps/c?dryRun=All"});
  CHECK(fake->count(KubeVerb::kGet, "/api/v1/nodes/n") == 1);
  CHECK(fake->count(KubeVerb::kList, "/api/v1/pods") == 1);
  // Nothing landed where a real write would have.
  CHECK_FALSE(fake->stored("/api/v1/namespaces/d/configmaps/c"));
}
