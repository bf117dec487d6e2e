// The sharing settings: one parse for flags and site config, with the
// bounds and defaults of gpunode/sharing.hpp, through the exposure registry.
#include <catch2/catch.hpp>

#include "exposure/gpu_exposure.hpp"

using namespace gpunode;

TEST_CASE("sharing: the default variant is one slot per GPU as nvidia.com/gpu",
          "[sharing]") {
  auto s = parse_sharing("default", std::nullopt, false);
  REQUIRE(s.sharing);
  CHECK_FALSE(s.problem);
  CHECK(s.sharing->variant == Variant::kDefault);
  CHECK(s.sharing->replicas == 1);
  CHECK(s.sharing->resource() == "nvidia.com/gpu");
  CHECK(sharing_inputs(*s.sharing) ==
        "variant=default\nreplicas=1\nrename_shared=false");
}

TEST_CASE("sharing: time-slicing defaults to 8 replicas and may rename",
          "[sharing]") {
  auto eight = parse_sharing("time-slicing", std::nullopt, false);
  REQUIRE(eight.sharing);
  CHECK(eight.sharing->replicas == kDefaultSharedReplicas);
  CHECK(eight.sharing->resource() == "nvidia.com/gpu");
  auto renamed = parse_sharing("time-slicing", 4, true);
  REQUIRE(renamed.sharing);
  CHECK(renamed.sharing->replicas == 4);
  CHECK(renamed.sharing->resource() == "nvidia.com/gpu.shared");
  CHECK(sharing_inputs(*renamed.sharing) ==
        "variant=time-slicing\nreplicas=4\nrename_shared=true");
}

TEST_CASE("sharing: each bad combination names its setting", "[sharing]") {
  struct Case {
    const char* variant;
    std::optional<long long> replicas;
    bool rename;
    SharingSetting setting;
    const char* fragment;
  };
  const Case cases[] = {
      {"mig", std::nullopt, false, SharingSetting::kVariant,
       "unknown variant 'mig'"},
      {"default", 4, false, SharingSetting::kReplicas,
       "applies only to --variant time-slicing"},
      {"default", std::nullopt, true, SharingSetting::kRename,
       "applies only to --variant time-slicing"},
      {"time-slicing", 1, false, SharingSetting::kReplicas,
       "needs at least 2 replicas"},
      {"time-slicing", 1025, false, SharingSetting::kReplicas,
       "1025 is more than 1024"},
  };
  for (const Case& c : cases) {
    INFO(c.variant << " " << c.replicas.value_or(-1) << " " << c.rename);
    auto s = parse_sharing(c.variant, c.replicas, c.rename);
    CHECK_FALSE(s.sharing);
    REQUIRE(s.problem);
    CHECK(s.problem->setting == c.setting);
    CHECK_THAT(s.problem->message, Catch::Contains(c.fragment));
  }
}

TEST_CASE("sharing: the bounds are the same for a settings file", "[sharing]") {
  CHECK(replicas_problem(kMinSharedReplicas).empty());
  CHECK(replicas_problem(kMaxReplicas).empty());
  CHECK(replicas_problem(kMinSharedReplicas - 1) ==
        "expected 2 to 1024 slots per GPU, got 1");
  CHECK_FALSE(replicas_problem(kMaxReplicas + 1).empty());
  CHECK(variant_problem("time-slicing").empty());
  CHECK_THAT(variant_problem("fractional"), Catch::Contains("choose"));
}
