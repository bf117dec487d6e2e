// What plan adds up from the stages' facts (installer/plan_totals.cpp).
#include "plan_totals.hpp"

#include <catch2/catch.hpp>

using namespace gpunode;

namespace {

Check with_facts(nlohmann::json facts) {
  Check c = needed("x.y", "summary", "action");
  c.facts = std::move(facts);
  return c;
}

}  // namespace

TEST_CASE("plan totals add the objects, bytes and disk of every stage",
          "[plan]") {
  PlanTotals t;
  CHECK(t.empty());
  t.add(with_facts({{"disk",
                     {{"path", "/var/lib/rancher/k3s/agent/containerd"},
                      {"needed_bytes", 3u * 1024 * 1024},
                      {"free_bytes", 10u * 1024 * 1024}}}}));
  t.add(with_facts({{"objects", {{"create", {"RuntimeClass nvidia"}}}},
                    {"dry_run", "accepted"}}));
  t.add(with_facts({{"import_bytes", 2u * 1024 * 1024}}));
  t.add(with_facts(
      {{"objects",
        {{"create", {"ConfigMap kube-system/nvidia-device-plugin-config"}},
         {"update", {"DaemonSet kube-system/nvidia-device-plugin-daemonset"}},
         {"delete", nlohmann::json::array()}}},
       {"dry_run", "accepted"}}));
  CHECK_FALSE(t.empty());
  const auto j = t.to_json();
  CHECK(j["objects"]["create"].size() == 2);
  CHECK(j["objects"]["update"].size() == 1);
  CHECK(j["objects"]["delete"].empty());
  CHECK(j["import_bytes"] == 2u * 1024 * 1024);
  CHECK(j["disk"]["free_bytes"] == 10u * 1024 * 1024);
  CHECK(j["dry_run"]["accepted"] == 2);
  CHECK(j["dry_run"]["refused"] == 0);
  CHECK(t.human() ==
        "would create 2, update 1, delete 0 object(s) (the API server's dry "
        "run accepts them); import 2 MiB; containerd disk "
        "(/var/lib/rancher/k3s/agent/containerd): about 3 MiB needed, 10 MiB "
        "free");
}

TEST_CASE("plan totals say when the dry run refused a stage's writes",
          "[plan]") {
  PlanTotals t;
  t.add(with_facts({{"objects", {{"create", {"RuntimeClass nvidia"}}}},
                    {"dry_run", "refused"}}));
  CHECK(t.to_json()["dry_run"]["refused"] == 1);
  CHECK_THAT(t.human(), Catch::Contains("dry run refuses 1 stage's writes"));
}

TEST_CASE("plan totals ignore facts of the wrong shape", "[plan]") {
  PlanTotals t;
  t.add(with_facts(
      {{"objects", "not an object"}, {"import_bytes", "12"}, {"disk", 5}}));
  CHECK(t.empty());
}
