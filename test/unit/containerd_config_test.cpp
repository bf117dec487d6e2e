// Reading the containerd config k3s renders: every fixture in
// test/fixtures/containerd, malformed input with its line, and the version
// rules (2 and 3 only).
#include "containerd/containerd_config.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/system_host.hpp"
#include "test_support.hpp"

namespace gpunode {
namespace {

struct RuntimeWant {
  std::string binary;
  bool systemd_cgroup;
};

struct FixtureWant {
  int version;
  std::string cri_plugin;
  std::vector<std::string> runtimes;                   // every runtime, sorted
  std::map<std::string, RuntimeWant> nvidia_runtimes;  // the NVIDIA ones
  std::optional<std::string> default_runtime_name;
};

const std::map<std::string, FixtureWant>& fixture_wants() {
  static const std::map<std::string, FixtureWant> wants = {
      {"v3-nvidia.toml",
       {3,
        "io.containerd.cri.v1.runtime",
        {"nvidia", "nvidia-cdi", "runc", "runhcs-wcow-process"},
        {{"nvidia", {"/usr/bin/nvidia-container-runtime", true}},
         {"nvidia-cdi", {"/usr/bin/nvidia-container-runtime.cdi", true}}},
        std::nullopt}},
      {"v3-no-nvidia.toml",
       {3,
        "io.containerd.cri.v1.runtime",
        {"runc", "runhcs-wcow-process"},
        {},
        std::nullopt}},
      {"v2-nvidia.toml",
       {2,
        "io.containerd.grpc.v1.cri",
        {"nvidia", "nvidia-experimental", "runc", "runhcs-wcow-process"},
        {{"nvidia", {"/usr/bin/nvidia-container-runtime", true}},
         {"nvidia-experimental",
          {"/usr/bin/nvidia-container-runtime-experimental", true}}},
        std::nullopt}},
      {"v3-nvidia-toolkit-dir.toml",
       {3,
        "io.containerd.cri.v1.runtime",
        {"nvidia", "runc", "runhcs-wcow-process"},
        {{"nvidia",
          {"/usr/local/nvidia/toolkit/nvidia-container-runtime", true}}},
        std::string("nvidia")}},
  };
  return wants;
}

Result<ContainerdConfig> parse_fixture(const std::string& name) {
  return parse_containerd_config(
      test::read_text(test::fixture("containerd/" + name)), "config.toml");
}

TEST_CASE(
    "every containerd fixture parses to the runtimes k3s rendered into it",
    "[handler]") {
  // Listing the directory makes a new fixture without expectations fail here.
  auto fs = make_rooted_file_system("/");
  std::vector<std::string> files;
  for (const auto& name : fs->list_dir(test::fixture("containerd"))) {
    if (name.size() > 5 && name.substr(name.size() - 5) == ".toml")
      files.push_back(name);
  }
  REQUIRE(files.size() == fixture_wants().size());
  for (const auto& name : files) {
    INFO(name);
    REQUIRE(fixture_wants().count(name) == 1);
    const FixtureWant& want = fixture_wants().at(name);
    auto config = parse_fixture(name);
    REQUIRE(config.ok());
    CHECK(config->version == want.version);
    CHECK(config->cri_plugin == want.cri_plugin);
    std::vector<std::string> names;
    for (const auto& rt : config->runtimes) names.push_back(rt.name);
    CHECK(names == want.runtimes);
    for (const auto& [handler, rt_want] : want.nvidia_runtimes) {
      INFO(handler);
      const ContainerdRuntime* rt = config->runtime(handler);
      REQUIRE(rt != nullptr);
      CHECK(rt->runtime_type ==
            std::optional<std::string>("io.containerd.runc.v2"));
      CHECK(rt->binary_name == std::optional<std::string>(rt_want.binary));
      CHECK(rt->systemd_cgroup == std::optional<bool>(rt_want.systemd_cgroup));
      CHECK(rt->line > 0);
    }
    CHECK(config->default_runtime_name == want.default_runtime_name);
    // runc is how the file tells which cgroup driver k3s runs with.
    REQUIRE(config->runtime("runc") != nullptr);
    CHECK(config->runtime("runc")->systemd_cgroup == std::optional<bool>(true));
  }
}

TEST_CASE("the runtime without options has no BinaryName and no SystemdCgroup",
          "[handler]") {
  auto config = parse_fixture("v3-nvidia.toml");
  REQUIRE(config.ok());
  const ContainerdRuntime* runhcs = config->runtime("runhcs-wcow-process");
  REQUIRE(runhcs != nullptr);
  CHECK(runhcs->runtime_type ==
        std::optional<std::string>("io.containerd.runhcs.v1"));
  CHECK_FALSE(runhcs->binary_name.has_value());
  CHECK_FALSE(runhcs->systemd_cgroup.has_value());
  CHECK(config->runtime("nvidia-experimental") == nullptr);
}

TEST_CASE(
    "a fix quotes the options table header the way each version spells it",
    "[handler]") {
  auto v3 = parse_fixture("v3-nvidia.toml");
  auto v2 = parse_fixture("v2-nvidia.toml");
  REQUIRE(v3.ok());
  REQUIRE(v2.ok());
  CHECK(v3->runtime_options_header("nvidia") ==
        "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'nvidia'."
        "options]");
  CHECK(v2->runtime_options_header("nvidia") ==
        "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia\"."
        "options]");
}

TEST_CASE("SystemdCgroup is told apart as missing, false and true",
          "[handler]") {
  const std::string head =
      "version = 3\n"
      "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'nvidia']\n"
      "  runtime_type = \"io.containerd.runc.v2\"\n"
      "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.'nvidia'."
      "options]\n"
      "  BinaryName = \"/usr/bin/nvidia-container-runtime\"\n";
  auto missing = parse_containerd_config(head, "c.toml");
  auto no =
      parse_containerd_config(head + "  SystemdCgroup = false\n", "c.toml");
  auto yes =
      parse_containerd_config(head + "  SystemdCgroup = true\n", "c.toml");
  REQUIRE(missing.ok());
  REQUIRE(no.ok());
  REQUIRE(yes.ok());
  CHECK(missing->runtime("nvidia")->systemd_cgroup == std::nullopt);
  CHECK(no->runtime("nvidia")->systemd_cgroup == std::optional<bool>(false));
  CHECK(yes->runtime("nvidia")->systemd_cgroup == std::optional<bool>(true));
  CHECK(yes->runtime("nvidia")->binary_name ==
        std::optional<std::string>("/usr/bin/nvidia-container-runtime"));
}

TEST_CASE("malformed TOML is a usage error naming the file and line",
          "[handler]") {
  const std::string text = "version = 3\n\n[plugins.broken\n  x = 1\n";
  auto config = parse_containerd_config(text, "/etc/x/config.toml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().exit == ExitCode::kUsage);
  CHECK(config.error().layer == "handler");
  CHECK_THAT(config.error().message,
             Catch::StartsWith("/etc/x/config.toml:3: "));
  CHECK_FALSE(config.error().fix.empty());
}

TEST_CASE("the malformed-config host tree's error points at the broken line",
          "[handler]") {
  // host-tree.sh appends "\n[plugins.broken\n  x = 1\n" to v3-nvidia.toml.
  const std::string good =
      test::read_text(test::fixture("containerd/v3-nvidia.toml"));
  const auto lines =
      static_cast<int>(std::count(good.begin(), good.end(), '\n'));
  auto config = parse_containerd_config(good + "\n[plugins.broken\n  x = 1\n",
                                        "config.toml");
  REQUIRE_FALSE(config.ok());
  CHECK_THAT(
      config.error().message,
      Catch::StartsWith("config.toml:" + std::to_string(lines + 2) + ": "));
}

TEST_CASE("a duplicate runtime table is malformed, as containerd would find it",
          "[handler]") {
  // What a template that repeats the base template's nvidia table produces.
  const std::string good =
      test::read_text(test::fixture("containerd/v3-nvidia.toml"));
  auto config =
      parse_containerd_config(good +
                                  "[plugins.'io.containerd.cri.v1.runtime'."
                                  "containerd.runtimes.'nvidia']\n",
                              "config.toml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().exit == ExitCode::kUsage);
  CHECK_THAT(config.error().message, Catch::StartsWith("config.toml:"));
}

TEST_CASE("versions other than 2 and 3 are refused as invalid input",
          "[handler]") {
  SECTION("version 4") {
    auto config = parse_containerd_config("version = 4\n", "config.toml");
    REQUIRE_FALSE(config.ok());
    CHECK(config.error().exit == ExitCode::kUsage);
    CHECK_THAT(config.error().message,
               Catch::StartsWith(
                   "config.toml:1: unsupported containerd config version 4"));
  }
  SECTION("no version key means version 1 to containerd") {
    auto config = parse_containerd_config("[plugins.cri]\n", "config.toml");
    REQUIRE_FALSE(config.ok());
    CHECK(config.error().exit == ExitCode::kUsage);
    CHECK_THAT(config.error().message, Catch::Contains("version 1"));
  }
  SECTION("a version that is not a number") {
    auto config = parse_containerd_config("version = \"3\"\n", "config.toml");
    REQUIRE_FALSE(config.ok());
    CHECK_THAT(config.error().message, Catch::Contains("not an integer"));
  }
}

TEST_CASE("a version 2 table layout in a version 3 file holds no runtimes",
          "[handler]") {
  // containerd 2 reads runtimes only from the v3 plugin name in a v3 file.
  const std::string text =
      "version = 3\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia\"]\n"
      "  runtime_type = \"io.containerd.runc.v2\"\n";
  auto config = parse_containerd_config(text, "config.toml");
  REQUIRE(config.ok());
  CHECK(config->runtime("nvidia") == nullptr);
}

TEST_CASE("wrong-typed nvidia settings are malformed input with their line",
          "[handler]") {
  const std::string text =
      "version = 2\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia\"]\n"
      "  runtime_type = \"io.containerd.runc.v2\"\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.\"nvidia\"."
      "options]\n"
      "  BinaryName = \"/usr/bin/nvidia-container-runtime\"\n"
      "  SystemdCgroup = \"true\"\n";
  auto config = parse_containerd_config(text, "config.toml");
  REQUIRE_FALSE(config.ok());
  CHECK(config.error().exit == ExitCode::kUsage);
  CHECK(config.error().message ==
        "config.toml:6: options.SystemdCgroup must be true or false");
}

TEST_CASE("a wrong-typed setting of an unrelated runtime is ignored",
          "[handler]") {
  const std::string text =
      "version = 3\n"
      "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.crun]\n"
      "  runtime_type = 7\n";
  auto config = parse_containerd_config(text, "config.toml");
  REQUIRE(config.ok());
  REQUIRE(config->runtime("crun") != nullptr);
  CHECK_FALSE(config->runtime("crun")->runtime_type.has_value());
}

TEST_CASE(
    "loading reads the host path under the root and reports a missing file",
    "[handler]") {
  test::TempDir tmp;
  test::write_text(tmp.path() + std::string(kContainerdConfigPath),
                   test::read_text(test::fixture("containerd/v2-nvidia.toml")));
  auto fs = make_rooted_file_system(tmp.path());
  auto config = load_containerd_config(*fs);
  REQUIRE(config.ok());
  CHECK(config->version == 2);
  auto missing = load_containerd_config(*fs, "/etc/nothing.toml");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("/etc/nothing.toml"));
}

}  // namespace
}  // namespace gpunode
