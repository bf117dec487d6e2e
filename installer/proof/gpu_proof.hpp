// Proof on every GPU of one node: proof Pods (proof/proof_pod.hpp) placed
// on the node, at most as many at once as it has free slots, until every
// GPU it published has run one to "Test PASSED", within a bound. With
// time-slicing the device plugin may give two Pods the same GPU, so the
// proof counts GPUs, not Pods, and names any GPU never reached. Every Pod
// it made is deleted before it returns, on a stop signal too.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/context.hpp"
#include "gpunode/kube.hpp"
#include "stages/smoke_diagnosis.hpp"

namespace gpunode {

struct ProofTarget {
  std::string node;
  // The UUIDs the node published (plugin/gpu_labels.hpp); empty: only the
  // count is known, and the proof covers that many distinct GPUs.
  std::vector<std::string> uuids;
  int gpus = 0;
  int slots_per_gpu = 1;  // the exposure's replicas
};

struct ProofSetup {
  std::string run_id;  // every Pod's kProofRunLabel, and its name's stem
  std::string image;
  std::string resource;  // what one slot is: nvidia.com/gpu, ...
  nlohmann::json limits;
  std::string import_fix;  // for a Pod whose image is missing
};

// One GPU's outcome.
struct GpuProof {
  std::string uuid;
  // "passed", "failed" (its Pod ran on it and CUDA failed) or "unreached"
  // (no Pod was given it within the bound).
  std::string result;
  std::string pod{};      // the Pod that passed or failed on it
  std::string at{};       // when that Pod was seen to end (UTC, ISO 8601)
  std::string message{};  // for failed: the cause, escaped
};

struct NodeProof {
  std::string node;
  bool uuids_published = false;
  std::vector<GpuProof> gpus;  // published ones in order, then any other
  int pods = 0;                // Pods run
  // A cause below the GPUs that ended the node's proof (the image, the
  // handler, no free slot): every Pod would meet it alike.
  std::optional<SmokeCause> stopped;
  // The last Pod's events (the one that met `stopped`, if any), read
  // before its deletion.
  std::vector<PodEvent> events;
  // A Pod could not be had at all (the API refused it): the stage's error,
  // not a check's finding.
  std::optional<Error> error;
  std::string last_pod;  // the last Pod watched, if any
  bool interrupted = false;
  std::chrono::milliseconds took{0};
  // Every GPU passed, and as many as the node has.
  bool ok() const;
  std::vector<std::string> with_result(const std::string& result) const;
};

NodeProof prove_node(Context& ctx, kube::Client& kube, const ProofTarget& t,
                     const ProofSetup& setup);

// The node's slots free now: its allocatable count of `resource` less what
// the Pods bound to it that have not ended ask for.
Result<long long> free_slots(kube::Client& kube, const std::string& node,
                             const std::string& resource,
                             std::chrono::steady_clock::time_point deadline);

}  // namespace gpunode
