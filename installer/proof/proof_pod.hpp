// The proof Pod: the CUDA sample on one GPU slot of one node, through the
// whole chain (runtimeClassName nvidia, the device plugin's slot), that
// says which GPU it was given. gpunode runs one per GPU until each GPU of
// the node has passed (proof/gpu_proof.hpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpunode {

inline constexpr const char* kProofNamespace = "default";
// Every proof Pod of one run carries this label with the run's id, so a
// rerun finds and removes what an interrupted one left.
inline constexpr const char* kProofRunLabel = "gpunode.io/proof-run";
// The line the Pod prints per GPU it was given, before the sample runs.
inline constexpr const char* kProofMark = "gpunode-proof gpu=";

struct ProofPodSpec {
  std::string name;
  std::string run_id;  // kProofRunLabel's value
  std::string node;    // where it must run
  std::string image;
  nlohmann::json limits;  // the exposure's smoke_limits(): one slot
};

// The Pod object. Its container runs, in the image's /bin/sh, a fixed
// script (no text of ours or the cluster's is put into it): it prints
// kProofMark and the UUID of each GPU it sees, from nvidia-smi (which the
// runtime mounts; under CDI the device plugin's NVIDIA_VISIBLE_DEVICES
// reads "void" in the container), else from NVIDIA_VISIBLE_DEVICES (the
// legacy runtime keeps the plugin's UUIDs there), then execs the sample,
// /cuda-samples/vectorAdd, as NVIDIA's cuda-sample images place it.
nlohmann::json proof_pod(const ProofPodSpec& spec);

// The GPUs a proof Pod's log names (kProofMark lines; a line may list
// several, comma-separated), in order, each once. Untrusted text: only
// words of the form a UUID takes ([A-Za-z0-9-] and ':', at most 96
// characters) are kept.
std::vector<std::string> gpus_in_log(const std::string& log);

}  // namespace gpunode
