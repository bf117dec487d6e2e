// The proof's pure parts: the proof Pod's shape, what its log says of the
// GPUs it was given (untrusted text), the UUIDs a Node publishes, and
// DCGM's diagnostic read from its JSON and run through a scripted dcgmi.
#include "proof/proof_pod.hpp"

#include <catch2/catch.hpp>

#include "plugin/gpu_labels.hpp"
#include "proof/dcgm_diag.hpp"
#include "scripted_runner.hpp"

namespace gpunode {
namespace {

using nlohmann::json;

const char* kUuid0 = "GPU-6f9abcd6-2781-31d5-1032-cc2f7821fbb8";
const char* kUuid1 = "GPU-6f9abcd6-2781-31d5-1032-cc2f7821fbb9";

TEST_CASE("proof pod: one slot, on its node, under the nvidia handler",
          "[proof]") {
  const json pod = proof_pod({"gpunode-smoke-1-0",
                              "gpunode-smoke-1",
                              "gpu-a",
                              "img:1",
                              {{"nvidia.com/gpu.shared", 1}}});
  CHECK(pod["metadata"]["labels"]["gpunode.io/proof-run"] == "gpunode-smoke-1");
  CHECK(pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpunode");
  CHECK(pod["spec"]["runtimeClassName"] == "nvidia");
  CHECK(pod["spec"]["restartPolicy"] == "Never");
  const json term = pod["spec"]["affinity"]["nodeAffinity"]
                       ["requiredDuringSchedulingIgnoredDuringExecution"]
                       ["nodeSelectorTerms"][0]["matchFields"][0];
  CHECK(term == json{{"key", "metadata.name"},
                     {"operator", "In"},
                     {"values", {"gpu-a"}}});
  const json c = pod["spec"]["containers"][0];
  CHECK(c["image"] == "img:1");
  CHECK(c["resources"]["limits"] == json{{"nvidia.com/gpu.shared", 1}});
  REQUIRE(c["command"].size() == 3);
  CHECK(c["command"][0] == "/bin/sh");
  // The script is a constant: nothing of the node's or the image's in it.
  CHECK(c["command"][2].get<std::string>().find("gpu-a") == std::string::npos);
  CHECK_THAT(c["command"][2].get<std::string>(),
             Catch::Contains("exec /cuda-samples/vectorAdd"));
}

TEST_CASE("proof log: the GPUs a proof Pod names, each once, in order",
          "[proof]") {
  const std::string log = std::string("gpunode-proof gpu=") + kUuid1 + "\n" +
                          "gpunode-proof gpu=" + kUuid0 + "," + kUuid1 + "\n" +
                          "[Vector addition of 50000 elements]\nTest PASSED\n";
  CHECK(gpus_in_log(log) == std::vector<std::string>{kUuid1, kUuid0});
}

TEST_CASE("proof log: words that are no GPU are not taken for one", "[proof]") {
  // void (CDI's NVIDIA_VISIBLE_DEVICES), none, all; a mark mid-line (the
  // sample's own output cannot forge one); control characters, spaces,
  // an overlong word.
  const std::string log =
      "gpunode-proof gpu=void\n"
      "gpunode-proof gpu=none\n"
      "gpunode-proof gpu=all\n"
      "x gpunode-proof gpu=GPU-forged\n"
      "gpunode-proof gpu=GPU-\x1b[31mred\n"
      "gpunode-proof gpu=GPU a b\n"
      "gpunode-proof gpu=" +
      std::string(97, 'A') + "\n";
  CHECK(gpus_in_log(log).empty());
  CHECK(gpus_in_log("").empty());
  CHECK(gpus_in_log("gpunode-proof gpu=").empty());
}

TEST_CASE("proof uuids: a Node publishes its GPUs beside the labels",
          "[proof]") {
  GpuInventory inv;
  inv.gpus.push_back({0, "NVIDIA H200", kUuid0, {}, {}, {}});
  inv.gpus.push_back({1, "NVIDIA H200", kUuid1, {}, {}, {}});
  const auto notes = gpu_annotations_for(inv);
  REQUIRE(notes.count(kGpuUuidsAnnotation) == 1);
  const json node = {{"metadata", {{"annotations", notes}}}};
  CHECK(published_gpu_uuids(node) == std::vector<std::string>{kUuid0, kUuid1});
  CHECK(published_gpu_uuids(json::object()).empty());
  CHECK(published_gpu_uuids(
            {{"metadata", {{"annotations", {{kGpuUuidsAnnotation, ",,"}}}}}})
            .empty());
}

// dcgmi diag -j as DCGM 3 prints it (per-GPU results name gpu_id).
const char* kDiagJson = R"({"DCGM GPU Diagnostic": {"test_categories": [
  {"category": "Deployment", "tests": [
    {"name": "Denylist", "results": [{"status": "Pass"}]},
    {"name": "NVML Library", "results": [{"status": "Pass"}]}]},
  {"category": "Integration", "tests": [
    {"name": "PCIe", "results": [{"gpu_id": "0", "status": "Pass"},
                                 {"gpu_id": "1", "status": "Fail",
                                  "warnings": [{"warning": "x"}]}]}]}]}})";

TEST_CASE("proof dcgm: the diagnostic's JSON, per test and per GPU",
          "[proof][dcgm]") {
  const DcgmDiag d = read_dcgm_json(kDiagJson, 1);
  CHECK(d.state == "failed");
  CHECK(d.level == 1);
  CHECK(d.tests.size() == 3);
  CHECK(d.gpus.at("0") == "Pass");
  CHECK(d.gpus.at("1") == "Fail");
  CHECK(d.message == "DCGM diagnostic level 1: 3 test(s), 1 failed");
  CHECK(d.failed());
  const DcgmDiag ok = read_dcgm_json(
      R"({"tests": [{"name": "Denylist", "results": [{"status": "Pass"}]}]})",
      2);
  CHECK(ok.state == "passed");
  CHECK_FALSE(ok.failed());
  // Not its JSON: an error, quoted escaped.
  const DcgmDiag bad = read_dcgm_json("Error: \x1b[31mno\n", 1);
  CHECK(bad.state == "error");
  CHECK(bad.message.find('\x1b') == std::string::npos);
  CHECK(read_dcgm_json("{}", 1).state == "error");
}

TEST_CASE("proof dcgm: absent, no host engine, and run at the depth asked",
          "[proof][dcgm]") {
  SECTION("no dcgmi: said so, nothing run") {
    test::ScriptedRunner proc;
    const DcgmDiag d = run_dcgm_diag(proc, 1, std::chrono::seconds(60));
    CHECK(d.state == "absent");
    CHECK_FALSE(d.failed());
    CHECK(proc.calls().empty());
  }
  SECTION("dcgmi without its host engine: said so, no diagnostic") {
    test::ScriptedRunner proc;
    proc.script("dcgmi discovery -l",
                "Error: unable to establish a connection to the specified "
                "host: localhost\n",
                255);
    const DcgmDiag d = run_dcgm_diag(proc, 1, std::chrono::seconds(60));
    CHECK(d.state == "no-host-engine");
    CHECK_FALSE(d.failed());
    CHECK(proc.calls() == std::vector<std::string>{"dcgmi discovery -l"});
  }
  SECTION("level 2 with its JSON; a failing test's exit code is no error") {
    test::ScriptedRunner proc;
    proc.script("dcgmi discovery -l", "1 GPU found.\n");
    proc.script("dcgmi diag -r 2 -j", kDiagJson, 226);
    const DcgmDiag d = run_dcgm_diag(proc, 2, std::chrono::minutes(15));
    CHECK(d.state == "failed");
    CHECK(d.level == 2);
    CHECK(proc.timeouts().back() == std::chrono::minutes(15));
  }
}

}  // namespace
}  // namespace gpunode
