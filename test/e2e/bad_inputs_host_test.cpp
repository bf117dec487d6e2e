// The bad-input corpus, host side: flags, the kubeconfig, k3s's containerd
// config, nvidia-smi's answers, the journal, and files gpunode cannot read.
// Each case: exit code per DESIGN.md's table, a message fragment naming the
// file or flag, and nothing changed (bad_inputs_runner.cpp checks that).
//
// "Unreadable" files: the tests run as root, so chmod 000 stops nothing.
// What a root process still cannot read is a directory where a file should
// be, a path that runs through a regular file (ENOTDIR), and a FIFO: open()
// of a FIFO blocks until a writer comes, so a reader that does not refuse
// non-regular files hangs; the runner's 40 s guard turns that into a failure.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "bad_inputs.hpp"

using namespace gpunode::test;
using namespace gpunode::test::bad;

namespace {

std::string kubeconfig(const Env& e) {
  return e.root + "/etc/rancher/k3s/k3s.yaml";
}
std::string journal(const Env& e) {
  return e.root + "/var/lib/gpunode/journal.json";
}

// Stages that only read the host: the journal cases run to the end.
const std::vector<std::string> kHostOnly = {"--only", "driver,toolkit,handler"};

BadInput flag(std::string name, std::vector<std::string> args,
              std::string fragment) {
  return {std::move(name),
          "good-v3",
          kNone,
          [args](Env& e) { return e.install(args); },
          2,
          std::move(fragment)};
}

}  // namespace

TEST_CASE("bad inputs: flags", "[e2e][bad-inputs]") {
  const std::vector<BadInput> cases = {
      flag("unknown flag", {"--frobnicate"}, "--frobnicate"),
      flag("unknown stage in --only", {"--only", "driver,gpus"},
           "--only: unknown stage 'gpus'"),
      flag("unknown stage in --skip", {"--skip", "everything"},
           "--skip: unknown stage 'everything'"),
      flag("scope unknown", {"--scope", "nodes"},
           "--scope: 'nodes' is not one of node, cluster, both"),
      flag("scope empty", {"--scope="}, "--scope: 1 required TEXT missing"),
      flag("replicas 0", {"--variant", "time-slicing", "--replicas", "0"},
           "--replicas: time-slicing needs at least 2"),
      flag("replicas -1", {"--variant", "time-slicing", "--replicas=-1"},
           "--replicas: time-slicing needs at least 2"),
      flag("replicas 10^9",
           {"--variant", "time-slicing", "--replicas", "1000000000"},
           "--replicas: 1000000000 is more than 1024"),
      flag("replicas beyond int",
           {"--variant", "time-slicing", "--replicas", "99999999999"},
           "--replicas"),
      flag("replicas not a number",
           {"--variant", "time-slicing", "--replicas", "eight"}, "--replicas"),
      // Decimal, as GPUNODE_REPLICAS reads it: not hex, and a leading 0 is
      // not octal (02001 is 2001, not 1025).
      flag("replicas in hex",
           {"--variant", "time-slicing", "--replicas", "0x10"},
           "--replicas: expected a whole number in decimal, got '0x10'"),
      flag("replicas with a leading 0 is decimal",
           {"--variant", "time-slicing", "--replicas", "02001"},
           "--replicas: 2001 is more than 1024"),
      flag("timeout 0", {"--timeout", "0"}, "--timeout: expected a positive"),
      flag("timeout negative", {"--timeout", "-5m"},
           "--timeout: expected a positive"),
      flag("timeout absurd", {"--timeout", "99999999h"}, "longer than a week"),
      flag("timeout no unit after a unit", {"--timeout", "1m30"},
           "--timeout: expected a positive"),
      flag("node name with a slash", {"--node", "gpu/node"},
           "--node: 'gpu/node' is not a valid Kubernetes node name"),
      flag("node name ..", {"--node", ".."}, "--node: '..'"),
      flag("node name empty", {"--node", ""}, "--node"),
      flag("replicas with the default variant", {"--replicas", "4"},
           "--replicas: applies only to --variant time-slicing"),
      flag("rename-shared with the default variant", {"--rename-shared"},
           "--rename-shared: applies only to --variant time-slicing"),
      flag("--only and --skip leave nothing",
           {"--only", "driver", "--skip", "driver"}, "leave no stage to run"),
      flag("variant unknown", {"--variant", "fractional"},
           "--variant: unknown variant 'fractional'"),
      flag("min-driver not a version", {"--min-driver", "latest"},
           "--min-driver"),
      flag("state-dir with ..", {"--state-dir", "/var/lib/../../etc"},
           "--state-dir"),
      {"root not a directory", "good-v3", kNone,
       [](Env& e) {
         return std::vector<std::string>{
             "install", "--root", e.root + "/etc/rancher/k3s/config.yaml"};
       },
       2, "is not a directory"},
      {"bundle and image-archive together", "good-v3", kNone,
       [](Env& e) {
         write_text(e.dir + "/dp.tar", "x");
         return e.install(
             {"--bundle", e.dir, "--image-archive", e.dir + "/dp.tar"});
       },
       2, "--image-archive: not with --bundle"},
      {"image-ref not a reference", "good-v3", kNone,
       [](Env& e) {
         return e.install({"--image-ref", "device plugin"});
       },
       2, "--image-ref"},
      {"node-name in k3s's config.yaml with ..", "good-v3", kNone,
       [](Env& e) {
         write_text(e.root + "/etc/rancher/k3s/config.yaml",
                    "node-name: ../../namespaces/kube-system\n");
         return e.install({});
       },
       2, "config.yaml"},
  };
  run_table("flags", cases);
}

TEST_CASE("bad inputs: kubeconfig", "[e2e][bad-inputs]") {
  auto with = [](std::string name, std::function<void(Env&)> damage, int code,
                 std::string fragment) {
    return damaged(std::move(name), "good-v3", std::move(damage), code,
                   std::move(fragment));
  };
  const std::vector<BadInput> cases = {
      with(
          "missing", [](Env& e) { ::unlink(kubeconfig(e).c_str()); }, 1,
          "/etc/rancher/k3s/k3s.yaml does not exist"),
      with(
          "a directory", [](Env& e) { replace_with_dir(kubeconfig(e)); }, 2,
          "is a directory"),
      with(
          "a FIFO (a read would block)",
          [](Env& e) { replace_with_fifo(kubeconfig(e)); }, 2,
          "k3s.yaml: is not a regular file"),
      with(
          "empty", [](Env& e) { write_text(kubeconfig(e), "", 0600); }, 2,
          "k3s.yaml"),
      with(
          "1 GB (sparse)",
          [](Env& e) { truncate_to(kubeconfig(e), 1LL << 30); }, 2,
          "k3s.yaml: is larger than"),
      with(
          "not YAML",
          [](Env& e) { write_text(kubeconfig(e), "{{{: [\n  -", 0600); }, 2,
          "is not valid YAML"),
      // With one context gpunode takes it (kubeconfig.cpp says so); with
      // two it cannot guess.
      with(
          "two contexts and no current-context",
          [](Env& e) {
            sed(kubeconfig(e), "current-context: default\n",
                "- context:\n    cluster: default\n    user: default\n"
                "  name: other\n");
          },
          2, "current-context is not set"),
      with(
          "CA not base64",
          [](Env& e) {
            sed(kubeconfig(e), "certificate-authority-data: ",
                "certificate-authority-data: not$base64!data");
          },
          2, "certificate-authority-data"),
      with(
          "CA of another cluster",
          [](Env& e) {
            write_text(kubeconfig(e),
                       read_text(e.sim->kubeconfig_with_wrong_ca()), 0600);
          },
          1, "certificate"),
      with(
          "client certificate expired",
          [](Env& e) {
            write_text(kubeconfig(e),
                       read_text(e.sim->kubeconfig_with_expired_cert()), 0600);
          },
          1, "expired on"),
      with(
          "server URL garbage",
          [](Env& e) {
            sed(kubeconfig(e), "server: https://", "server: ht!tp:// ::");
          },
          2, "server"),
      {"--kubeconfig through a regular file (ENOTDIR)", "good-v3", kNone,
       [](Env& e) {
         return e.install(
             {"--kubeconfig", "/etc/rancher/k3s/config.yaml/k3s.yaml"});
       },
       1, "/etc/rancher/k3s/config.yaml/k3s.yaml"},
      // The independent try: a typo'd path was told to copy a server's
      // admin kubeconfig to the node (which the README forbids).
      {"--kubeconfig a path that does not exist", "good-v3", kNone,
       [](Env& e) {
         return e.install({"--kubeconfig", "/nope.yaml"});
       },
       1, "check the path given as the kubeconfig"},
  };
  run_table("kubeconfig", cases);
}

TEST_CASE("bad inputs: containerd config", "[e2e][bad-inputs]") {
  auto with = [](std::string name, std::string scenario,
                 std::function<void(Env&)> damage, int code,
                 std::string fragment) {
    return damaged(std::move(name), std::move(scenario), std::move(damage),
                   code, std::move(fragment));
  };
  const std::string nvidia_table =
      "runtimes.'nvidia']\n  runtime_type = \"io.containerd.runc.v2\"";
  const std::vector<BadInput> cases = {
      with(
          "not TOML", "malformed-config", [](Env&) {}, 2, "config.toml:"),
      with(
          "nvidia runtime missing", "toolkit-after-k3s", [](Env&) {}, 1,
          "systemctl restart k3s"),
      with(
          "wrong runtime_type", "good-v3",
          [nvidia_table](Env& e) {
            sed(cd_config(e), nvidia_table,
                "runtimes.'nvidia']\n  runtime_type = "
                "\"io.containerd.runsc.v1\"");
          },
          1, "io.containerd.runsc.v1"),
      with(
          "BinaryName pointing nowhere", "stale-handler", [](Env&) {}, 1,
          "/usr/bin/nvidia-container-runtime"),
      with(
          "a directory in its place", "good-v3",
          [](Env& e) { replace_with_dir(cd_config(e)); }, 2, "config.toml"),
      with(
          "a FIFO in its place (a read would block)", "good-v3",
          [](Env& e) { replace_with_fifo(cd_config(e)); }, 2, "config.toml"),
      with(
          "truncated inside the nvidia table header", "good-v3",
          [](Env& e) {
            const auto at = read_text(cd_config(e)).find("runtimes.'nvid");
            truncate_to(cd_config(e), static_cast<long long>(at) + 14);
          },
          2, "config.toml:"),
      with(
          "1 GB (sparse)", "good-v3",
          [](Env& e) { truncate_to(cd_config(e), 1LL << 30); }, 2,
          "config.toml is larger than"),
      with(
          // k3s never renders an empty file: damaged, not "no handler".
          "empty", "good-v3", [](Env& e) { truncate_to(cd_config(e), 0); }, 2,
          "no `version` key"),
  };
  run_table("containerd config", cases);
}

TEST_CASE("bad inputs: nvidia-smi output", "[e2e][bad-inputs]") {
  auto mode = [](std::string name, std::string value, int code,
                 std::string fragment,
                 std::vector<std::string> args = std::vector<std::string>{}) {
    return BadInput{std::move(name),
                    "good-v3",
                    kNone,
                    [value, args](Env& e) {
                      e.env.push_back("GPUNODE_SIM_GPU_MODE=" + value);
                      return e.install(args);
                    },
                    code,
                    std::move(fragment)};
  };
  const std::vector<BadInput> cases = {
      mode("garbage", "garbage", 1, "output line 1 is malformed"),
      // The same bytes quoted into --json output and the journal.
      mode("garbage, --json", "garbage", 1, "\"exit_code\":1", {"--json"}),
      mode("empty", "empty", 1, "nvidia-smi"),
      mode("exit non-zero", "fail", 1, "Unknown Error"),
      mode("partial CSV", "partial", 1, "nvidia-smi"),
      mode("never answers", "hang", 3, "nvidia-smi", {"--timeout", "3s"}),
      {"driver version file is a directory", "good-v3", kNone,
       [](Env& e) {
         replace_with_dir(e.root + "/proc/driver/nvidia/version");
         return e.install({});
       },
       2, "/proc/driver/nvidia/version"},
  };
  run_table("nvidia-smi", cases);
}

TEST_CASE("bad inputs: journal", "[e2e][bad-inputs]") {
  // DESIGN.md: "A corrupt or unknown-version journal is reported and
  // ignored": the run goes on (exit 0 on the host stages) and writes a new
  // journal. Only one it cannot replace stops the run.
  auto with = [](std::string name, std::function<void(Env&)> damage, int code,
                 std::string fragment) {
    return damaged(std::move(name), "good-v3", std::move(damage), code,
                   std::move(fragment), kHostOnly);
  };
  const std::vector<BadInput> cases = {
      with(
          "garbage",
          [](Env& e) { write_text(journal(e), "\x01\x02 not json at all"); }, 0,
          "journal.json ignored"),
      with(
          "foreign version",
          [](Env& e) {
            write_text(journal(e), R"({"version": 99, "stages": {}})");
          },
          0, "version 99"),
      with(
          "truncated JSON",
          [](Env& e) {
            write_text(journal(e), R"({"version": 1, "stages": {"driver": {)");
          },
          0, "journal.json ignored"),
      with(
          "1 GB (sparse)",
          [](Env& e) {
            write_text(journal(e), "{");
            truncate_to(journal(e), 1LL << 30);
          },
          0, "journal"),
      with(
          "a FIFO in its place (a read would block)",
          [](Env& e) {
            write_text(journal(e), "");
            replace_with_fifo(journal(e));
          },
          0, "journal"),
      with(
          "a directory in its place",
          [](Env& e) {
            write_text(journal(e), "");
            replace_with_dir(journal(e));
          },
          5, "cannot write the journal /var/lib/gpunode/journal.json"),
      {"state dir through a regular file (ENOTDIR)", "good-v3", kNone,
       [](Env& e) {
         std::vector<std::string> args = kHostOnly;
         args.insert(args.end(),
                     {"--state-dir", "/etc/rancher/k3s/config.yaml/state"});
         return e.install(args);
       },
       5, "/etc/rancher/k3s/config.yaml/state"},
  };
  run_table("journal", cases);
}
