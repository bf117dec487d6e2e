// The Reporter's --json events: the schema version a reader checks first
// (docs/json-events.md), and the facts a stage event carries.
#include "gpunode/report.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

namespace gpunode {
namespace {

using json = nlohmann::json;

class NamedStage : public Stage {
 public:
  std::string_view name() const override { return "driver"; }
  std::string_view layer() const override { return "NVIDIA driver"; }
  std::string inputs(Context&) const override { return ""; }
  Check check(Context&) override { return satisfied("x", "y"); }
  Result<void> apply(Context&, const Check&) override { return {}; }
};

}  // namespace

TEST_CASE("report: the result event carries the schema version", "[report]") {
  std::ostringstream out, err;
  Reporter report(out, err, /*json=*/true, /*color=*/false);
  report.result("status", ExitCode::kOk, "", {{"driver", "satisfied"}},
                json{{"plan", json::object()}});
  const json event = json::parse(out.str());
  CHECK(event["event"] == "result");
  REQUIRE(event["schema"].is_number_integer());
  CHECK(event["schema"] == kJsonSchemaVersion);
  CHECK(kJsonSchemaVersion == 1);
  // The fields that were there before the version stay as they were.
  CHECK(event["command"] == "status");
  CHECK(event["exit_code"] == 0);
  CHECK(event["stages"] ==
        json::array({{{"stage", "driver"}, {"status", "satisfied"}}}));
}

TEST_CASE("report: a stage event carries its check's facts as fields",
          "[report]") {
  std::ostringstream out, err;
  Reporter report(out, err, /*json=*/true, /*color=*/false);
  NamedStage stage;
  Check c = satisfied("driver.ok", "1 GPU");
  c.facts["gpu_count"] = 1;
  report.check(stage, c);
  const json event = json::parse(out.str());
  CHECK(event["event"] == "stage");
  CHECK(event["facts"] == json{{"gpu_count", 1}});
}

}  // namespace gpunode
