#include "cli/flags.hpp"

#include <catch2/catch.hpp>

using namespace gpunode;
using namespace std::chrono_literals;

TEST_CASE("durations read the way operators write them", "[flags]") {
  CHECK(*parse_duration("10m") == 600000ms);
  CHECK(*parse_duration("90s") == 90000ms);
  CHECK(*parse_duration("1h30m") == 5400000ms);
  CHECK(*parse_duration("500ms") == 500ms);
  CHECK(*parse_duration("45") == 45000ms);
}

TEST_CASE("bad durations are usage errors naming --timeout", "[flags]") {
  for (const char* bad : {"", "-5m", "0", "0s", "5x", "m", "1.5m", "10m-",
                          "9999999999s", "200h"}) {
    INFO(bad);
    auto r = parse_duration(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == ExitCode::kUsage);
    CHECK_THAT(r.error().message, Catch::StartsWith("--timeout"));
  }
}

namespace {
FlagValues base() {
  FlagValues v;
  v.root = "/";
  return v;
}
void expect_usage(const FlagValues& v, const std::string& flag) {
  auto r = validate_flags(v);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
  CHECK_THAT(r.error().message, Catch::StartsWith(flag));
}
}  // namespace

TEST_CASE("the defaults are the contract's", "[flags]") {
  auto o = validate_flags(base());
  REQUIRE(o);
  CHECK(o->sharing.variant == Variant::kDefault);
  CHECK(o->sharing.replicas == 1);
  CHECK(o->timeout == 600000ms);
  CHECK(o->state_dir == "/var/lib/gpunode");
  CHECK(o->kubeconfig == "/etc/rancher/k3s/k3s.yaml");
}

TEST_CASE("time-slicing defaults to 8 replicas and accepts 2 and more",
          "[flags]") {
  FlagValues v = base();
  v.variant = "time-slicing";
  CHECK(validate_flags(v)->sharing.replicas == 8);
  v.replicas = 2;
  CHECK(validate_flags(v)->sharing.replicas == 2);
  v.rename_shared = true;
  CHECK(validate_flags(v)->sharing.rename);
}

TEST_CASE("each bad flag value is refused naming the flag", "[flags]") {
  FlagValues v = base();
  SECTION("unknown variant") {
    v.variant = "mig";
    expect_usage(v, "--variant");
  }
  SECTION("replicas 1 with time-slicing") {
    v.variant = "time-slicing";
    v.replicas = 1;
    expect_usage(v, "--replicas");
  }
  SECTION("replicas 0 with time-slicing") {
    v.variant = "time-slicing";
    v.replicas = 0;
    expect_usage(v, "--replicas");
  }
  SECTION("absurd replicas") {
    v.variant = "time-slicing";
    v.replicas = 1000000000;
    expect_usage(v, "--replicas");
  }
  SECTION("replicas with the default variant") {
    v.replicas = 4;
    expect_usage(v, "--replicas");
  }
  SECTION("rename without time-slicing") {
    v.rename_shared = true;
    expect_usage(v, "--rename-shared");
  }
  SECTION("negative timeout") {
    v.timeout = "-1m";
    expect_usage(v, "--timeout");
  }
  SECTION("node with a slash") {
    v.node = "gpu/../x";
    expect_usage(v, "--node");
  }
  SECTION("node with dots") {
    v.node = "a..b";
    expect_usage(v, "--node");
  }
  SECTION("node given but empty (--node \"$NODE\" with NODE unset)") {
    v.node = "";
    expect_usage(v, "--node");
  }
  SECTION("node in capitals") {
    v.node = "GPU1";
    expect_usage(v, "--node");
  }
  SECTION("relative root") {
    v.root = "fixture";
    expect_usage(v, "--root");
  }
  SECTION("missing root") {
    v.root = "/nonexistent/gpunode";
    expect_usage(v, "--root");
  }
  SECTION("relative state dir") {
    v.state_dir = "state";
    expect_usage(v, "--state-dir");
  }
  SECTION("state dir escaping") {
    v.state_dir = "/var/../etc";
    expect_usage(v, "--state-dir");
  }
  SECTION("bad min driver") {
    v.min_driver = "550.x";
    expect_usage(v, "--min-driver");
  }
  SECTION("min driver with empty part") {
    v.min_driver = "550..1";
    expect_usage(v, "--min-driver");
  }
}

TEST_CASE("the image flags default to images.lock and check the archive path",
          "[flags]") {
  FlagValues v = base();
  auto o = validate_flags(v);
  REQUIRE(o);
  CHECK(o->image_ref == "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  CHECK_FALSE(o->image_archive);
  SECTION("missing archive") {
    v.image_archive = "/nonexistent/dp.tar";
    expect_usage(v, "--image-archive");
  }
  SECTION("a directory is not an archive") {
    v.image_archive = "/tmp";
    expect_usage(v, "--image-archive");
  }
  SECTION("a bare name is not a reference") {
    v.image_ref = "device-plugin";
    expect_usage(v, "--image-ref");
  }
}
