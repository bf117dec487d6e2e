#include "gpunode/pipeline.hpp"

#include <catch2/catch.hpp>

using namespace gpunode;

namespace {
std::vector<std::string> names(const StageList& l) {
  std::vector<std::string> out;
  for (const auto& s : l) out.emplace_back(s->name());
  return out;
}
}  // namespace

TEST_CASE("the pipeline runs the layers bottom-up", "[pipeline]") {
  CHECK(pipeline_stage_names() ==
        std::vector<std::string>{"preflight", "driver", "toolkit", "handler",
                                 "runtimeclass", "image", "labels", "plugin",
                                 "allocatable", "smoke"});
}

TEST_CASE("stage selection with --only and --skip keep the pipeline's order",
          "[pipeline]") {
  auto r = select_stages(make_pipeline(), {"handler", "driver"}, {});
  REQUIRE(r);
  CHECK(names(*r) == std::vector<std::string>{"driver", "handler"});
  auto s = select_stages(make_pipeline(), {}, {"preflight", "toolkit"});
  REQUIRE(s);
  CHECK(names(*s) ==
        std::vector<std::string>{"driver", "handler", "runtimeclass", "image",
                                 "labels", "plugin", "allocatable", "smoke"});
}

TEST_CASE("an unknown stage name is a usage error listing the stages",
          "[pipeline]") {
  auto r = select_stages(make_pipeline(), {"drivers"}, {});
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
  CHECK_THAT(r.error().message,
             Catch::Contains("--only: unknown stage 'drivers'"));
  CHECK_THAT(
      r.error().message,
      Catch::Contains("preflight, driver, toolkit, handler, runtimeclass, "
                      "image, labels, plugin, allocatable, smoke"));
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
