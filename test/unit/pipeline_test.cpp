#include "gpunode/pipeline.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>

using namespace gpunode;

namespace {
std::vector<std::string> names(const StageList& l) {
  std::vector<std::string> out;
  for (const auto& s : l) out.emplace_back(s->name());
  return out;
}
}  // namespace

// The order itself has one owner, stages/stages.hpp; its reviewed copy is
// the README's stage table, which test/e2e/stage_list_test.cpp holds to the
// binary. Here: what bottom-up means whatever stages come later.
TEST_CASE("the pipeline runs the layers bottom-up", "[pipeline]") {
  const auto all = pipeline_stage_names();
  REQUIRE(all.size() >= 10);
  CHECK(std::set<std::string>(all.begin(), all.end()).size() == all.size());
  auto at = [&](const char* name) {
    return std::find(all.begin(), all.end(), name) - all.begin();
  };
  // Inputs first; the driver under the toolkit under the handler; the
  // RuntimeClass and the image before the labels that let the DaemonSet
  // land; the slots after the plugin; the Pod that uses them all last.
  CHECK(all.front() == "preflight");
  CHECK(at("driver") < at("toolkit"));
  CHECK(at("toolkit") < at("handler"));
  CHECK(at("handler") < at("runtimeclass"));
  CHECK(at("runtimeclass") < at("labels"));
  CHECK(at("image") < at("labels"));
  CHECK(at("labels") < at("plugin"));
  CHECK(at("plugin") < at("allocatable"));
  CHECK(all.back() == "smoke");
}

namespace {

// The pipeline's names without `drop`, in its order.
std::vector<std::string> pipeline_without(const std::set<std::string>& drop) {
  std::vector<std::string> out;
  for (const auto& n : pipeline_stage_names())
    if (drop.count(n) == 0) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("stage selection with --only and --skip keep the pipeline's order",
          "[pipeline]") {
  auto r = select_stages(make_pipeline(), {"handler", "driver"}, {});
  REQUIRE(r);
  CHECK(names(*r) == std::vector<std::string>{"driver", "handler"});
  auto s = select_stages(make_pipeline(), {}, {"preflight", "toolkit"});
  REQUIRE(s);
  CHECK(names(*s) == pipeline_without({"preflight", "toolkit"}));
}

// Regression (independent try of issue 26): no fix said what to change.
TEST_CASE("only and skip lists that leave nothing say which to change",
          "[pipeline]") {
  auto r = select_stages(make_pipeline(), {"driver"}, {"driver"});
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
  CHECK(r.error().message == "--only/--skip leave no stage to run");
  CHECK(r.error().fix == "drop from --skip the stages --only names");
  auto all = select_stages(make_pipeline(), {}, pipeline_stage_names());
  REQUIRE_FALSE(all);
  CHECK(all.error().fix == "skip fewer stages with --skip");
}

TEST_CASE("an unknown stage name is a usage error listing the stages",
          "[pipeline]") {
  auto r = select_stages(make_pipeline(), {"drivers"}, {});
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
  CHECK_THAT(r.error().message,
             Catch::Contains("--only: unknown stage 'drivers'"));
  std::string listed;
  for (const auto& n : pipeline_stage_names())
    listed += (listed.empty() ? "" : ", ") + n;
  CHECK_THAT(r.error().message, Catch::Contains("(stages: " + listed + ")"));
  auto s = select_stages(make_pipeline(), {}, {"nope"});
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().message,
             Catch::StartsWith("--skip: unknown stage 'nope'"));
}

TEST_CASE(
    "stage selection with --only and --skip that leave nothing are refused",
    "[pipeline]") {
  auto r = select_stages(make_pipeline(), {"driver"}, {"driver"});
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
}

// Regression (independent try of issue 26): no fix line came with it.
TEST_CASE("an unknown stage name says how to fix it", "[pipeline]") {
  auto r = select_stages(make_pipeline(), {"drivr"}, {});
  REQUIRE_FALSE(r);
  CHECK(r.error().fix ==
        "name stages from that list in --only (gpunode version lists them)");
  auto s = select_stages(make_pipeline(), {}, {"bogus"});
  REQUIRE_FALSE(s);
  CHECK(s.error().fix ==
        "name stages from that list in --skip (gpunode version lists them)");
}
