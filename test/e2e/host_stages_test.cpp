// The real binary against simulated host trees (test/sim/host-tree.sh) with
// the simulated nvidia-smi and systemctl on PATH.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_support.hpp"

using gpunode::test::Background;
using gpunode::test::make_host_tree;
using gpunode::test::Run;
using gpunode::test::run_gpunode;
using gpunode::test::snapshot_host_tree;
using gpunode::test::snapshot_tree;
using gpunode::test::TempDir;
using json = nlohmann::json;

namespace {

std::vector<json> json_lines(const std::string& out) {
  std::vector<json> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    lines.push_back(json::parse(line));  // throws if not JSON
  return lines;
}

json stage_event(const std::vector<json>& lines, const std::string& stage) {
  for (const auto& l : lines) {
    if (l.value("event", "") == "stage" && l.value("stage", "") == stage)
      return l;
  }
  return json();
}

// The host layers alone; the image layer has tests of its own with a real
// containerd (image_stage_test.cpp).
const std::vector<std::string> kHostStages = {"--only",
                                              "driver,toolkit,handler"};

}  // namespace

TEST_CASE(
    "a good host tree is satisfied and its --json output parses line by line",
    "[e2e][host]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  const std::string scenario =
      GENERATE(std::string("good-v3"), std::string("good-v2"),
               std::string("agent"), std::string("toolkit-dir"));
  make_host_tree(root, scenario);
  auto before = snapshot_host_tree(root);
  std::vector<std::string> args{"install", "--root", root, "--json"};
  args.insert(args.end(), kHostStages.begin(), kHostStages.end());
  Run r = run_gpunode(args);
  INFO(scenario << "\n" << r.err);
  CHECK(r.exit_code == 0);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() >= 4);
  for (const char* s : {"driver", "toolkit", "handler"}) {
    CHECK(stage_event(lines, s).value("status", "") == "satisfied");
  }
  CHECK(lines.back().value("event", "") == "result");
  CHECK(lines.back().value("exit_code", -1) == 0);
  // Only gpunode's own state was written.
  CHECK(snapshot_host_tree(root) == before);
  // The journal recorded every stage.
  auto journal = json::parse(
      gpunode::test::read_text(root + "/var/lib/gpunode/journal.json"));
  CHECK(journal["version"] == 1);
  CHECK(journal["stages"]["handler"]["result"] == "satisfied");
}

TEST_CASE("toolkit installed after k3s started: exit 1 with the restart fix",
          "[e2e][host]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  make_host_tree(root, "toolkit-after-k3s");
  auto before = snapshot_host_tree(root);
  std::vector<std::string> args{"install", "--root", root};
  args.insert(args.end(), kHostStages.begin(), kHostStages.end());
  Run r = run_gpunode(args);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("[ERROR handler]"));
  CHECK_THAT(r.err, Catch::Contains("systemctl restart k3s"));
  CHECK(snapshot_host_tree(root) == before);
}

TEST_CASE(
    "with --restart-k3s, gpunode restarts k3s, waits for the new config, and "
    "converges",
    "[e2e][host]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  make_host_tree(root, "toolkit-after-k3s");
  const std::string log = t.path() + "/systemctl.log";
  std::vector<std::string> env{"GPUNODE_SIM_ROOT=" + root,
                               "GPUNODE_SIM_SYSTEMCTL_LOG=" + log};
  Run r = run_gpunode({"install", "--root", root, "--restart-k3s", "--json",
                       "--only", "preflight,driver,toolkit,handler"},
                      env);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(stage_event(json_lines(r.out), "handler").empty() == false);
  CHECK(gpunode::test::read_text(log) == "restart k3s\n");
  // A rerun finds everything in place and restarts nothing.
  Run again = run_gpunode({"install", "--root", root, "--restart-k3s", "--only",
                           "preflight,driver,toolkit,handler"},
                          env);
  CHECK(again.exit_code == 0);
  CHECK(gpunode::test::read_text(log) == "restart k3s\n");
}

TEST_CASE("status is read-only and exits 1 naming the broken layer",
          "[e2e][host]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  make_host_tree(root, "no-toolkit");
  auto before = snapshot_tree(root);
  Run r = run_gpunode({"status", "--root", root, "--json"});
  CHECK(r.exit_code == 1);
  auto lines = json_lines(r.out);
  CHECK(stage_event(lines, "driver").value("status", "") == "satisfied");
  CHECK(stage_event(lines, "toolkit").value("status", "") == "blocked");
  CHECK(snapshot_tree(root) == before);  // not even a state directory
}

TEST_CASE("a malformed containerd config exits 2 naming the file and line",
          "[e2e][host]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  make_host_tree(root, "malformed-config");
  Run r = run_gpunode({"install", "--root", root, "--only", "handler"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("config.toml:"));
}

TEST_CASE("bad flags exit 2 naming the flag and change nothing", "[e2e][cli]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  make_host_tree(root, "good-v3");
  auto before = snapshot_tree(root);
  struct Case {
    std::vector<std::string> extra;
    const char* flag;
  };
  const std::vector<Case> cases = {
      {{"--only", "driver,gpus"}, "--only"},
      {{"--skip", "everything"}, "--skip"},
      {{"--variant", "fractional"}, "--variant"},
      {{"--variant", "time-slicing", "--replicas", "1"}, "--replicas"},
      {{"--variant", "time-slicing", "--replicas", "0"}, "--replicas"},
      {{"--timeout", "-5m"}, "--timeout"},
      {{"--timeout", "0"}, "--timeout"},
      {{"--node", "../etc"}, "--node"},
      {{"--replicas", "abc"}, "--replicas"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"install", "--root", root};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    Run r = run_gpunode(args);
    INFO(c.flag << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.flag));
  }
  CHECK(snapshot_tree(root) == before);
}

TEST_CASE("install as a normal user exits 5 and changes nothing",
          "[e2e][host]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  make_host_tree(root, "good-v3");
  ::chmod(t.path().c_str(), 0755);
  auto before = snapshot_tree(root);
  Run r = gpunode::test::run_with_sim(
      {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
       GPUNODE_BINARY, "install", "--root", root});
  INFO(r.err);
  CHECK(r.exit_code == 5);
  CHECK_THAT(r.err, Catch::Contains("must run as root"));
  CHECK(snapshot_tree(root) == before);
}

TEST_CASE(
    "a second concurrent install exits 5 naming the run that holds the lock",
    "[e2e][host]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  make_host_tree(root, "good-v3");
  // The first run hangs in nvidia-smi while holding the lock.
  Background first(
      {GPUNODE_BINARY, "install", "--root", root, "--only", "preflight,driver"},
      {"GPUNODE_SIM_GPU_MODE=hang"});
  for (int i = 0;
       i < 500 && first.err_so_far().find("[preflight]") == std::string::npos;
       ++i) {
    ::usleep(10000);
  }
  Run second = run_gpunode({"install", "--root", root});
  INFO(second.err);
  CHECK(second.exit_code == 5);
  CHECK_THAT(second.err, Catch::Contains("another gpunode run holds"));
  CHECK_THAT(second.err, Catch::Contains("pid " + std::to_string(first.pid())));
  first.kill_all(SIGKILL);
  first.wait();
  // The kernel released the dead run's lock: the next run works and says
  // that the previous one did not finish.
  Run third = run_gpunode({"install", "--root", root, "--only",
                           "preflight,driver,toolkit,handler"});
  CHECK(third.exit_code == 0);
  CHECK_THAT(third.err, Catch::Contains("did not finish"));
}

TEST_CASE("without a TTY or with NO_COLOR the output has no colour codes",
          "[e2e][cli]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  make_host_tree(root, "no-toolkit");
  Run r = run_gpunode({"status", "--root", root}, {"NO_COLOR=1"});
  CHECK(r.err.find('\033') == std::string::npos);
}

TEST_CASE("the host stages' facts as --json fields (docs/json-events.md)",
          "[e2e][host][facts]") {
  TempDir t;
  const std::string root = t.path() + "/node";
  SECTION("a server with the system toolkit") {
    make_host_tree(root, "good-v3");
    Run r = run_gpunode({"status", "--root", root, "--json", "--only",
                         "preflight,driver,toolkit,handler"});
    INFO(r.err);
    auto lines = json_lines(r.out);
    const json pre = stage_event(lines, "preflight")["facts"];
    CHECK(pre["k3s_unit"] == "k3s");
    CHECK(pre["k3s_unit_file"] == "/etc/systemd/system/k3s.service");
    CHECK(pre["node"] == "gpu-node-1");
    CHECK(pre["bundle"].is_null());
    const json drv = stage_event(lines, "driver")["facts"];
    CHECK(drv["gpu_count"] == 1);
    CHECK(drv["gpus"][0]["uuid"] == "GPU-6f9abcd6-2781-31d5-1032-cc2f7821fbb8");
    const json tk = stage_event(lines, "toolkit")["facts"];
    CHECK(tk["runtime"] == json{{"path", "/usr/bin/nvidia-container-runtime"},
                                {"found_in", "/usr/bin"}});
    CHECK(tk["shadowed"] == json::array());
    CHECK(tk["handlers"][0] ==
          json{{"handler", "nvidia"},
               {"path", "/usr/bin/nvidia-container-runtime"}});
    const json h = stage_event(lines, "handler")["facts"];
    CHECK(h["handler"] == "nvidia");
    CHECK(h["runtime_binary"] == "/usr/bin/nvidia-container-runtime");
    CHECK(h["runtime_type"] == "io.containerd.runc.v2");
    CHECK(h["config_version"] == 3);
    CHECK(h["systemd_cgroup"] == true);
    CHECK(h["template_override"].is_null());
    CHECK(h["k3s_unit"] == "k3s");
    CHECK(h["config_path"] ==
          "/var/lib/rancher/k3s/agent/etc/containerd/config.toml");
  }
  SECTION("a GPU-operator leftover shadows the system toolkit") {
    make_host_tree(root, "toolkit-shadow");
    Run r =
        run_gpunode({"status", "--root", root, "--json", "--only", "toolkit"});
    INFO(r.err);
    const json tk = stage_event(json_lines(r.out), "toolkit")["facts"];
    CHECK(tk["runtime"]["found_in"] == "/usr/local/nvidia/toolkit");
    CHECK(tk["shadowed"] == json::array({"/usr/bin/nvidia-container-runtime"}));
  }
  SECTION("an agent") {
    make_host_tree(root, "agent");
    Run r = run_gpunode(
        {"status", "--root", root, "--json", "--only", "preflight,handler"});
    INFO(r.err);
    auto lines = json_lines(r.out);
    CHECK(stage_event(lines, "preflight")["facts"]["k3s_unit"] == "k3s-agent");
    CHECK(stage_event(lines, "handler")["facts"]["k3s_unit"] == "k3s-agent");
  }
}
