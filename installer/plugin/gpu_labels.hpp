// The Node labels that say a node has GPUs, under the names of NVIDIA's GPU
// Feature Discovery where one exists (gpu-feature-discovery's
// internal/lm/resource.go: nvidia.com/gpu.count, .product, .memory; the
// Helm chart's nvidia.com/gpu.present): the node part sets them from what
// the driver layer counts, the device plugin DaemonSet selects on
// kGpuPresentLabel, and the cluster part reads each node's expected count.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/gpu.hpp"
#include "gpunode/kube.hpp"

namespace gpunode {

inline constexpr const char* kGpuPresentLabel = "nvidia.com/gpu.present";
inline constexpr const char* kGpuCountLabel = "nvidia.com/gpu.count";
inline constexpr const char* kGpuProductLabel = "nvidia.com/gpu.product";
inline constexpr const char* kGpuMemoryLabel = "nvidia.com/gpu.memory";

// The UUIDs of a node's GPUs, as its node part publishes them: the proof
// (proof/gpu_proof.hpp) knows from them when every GPU of the node has run
// a Pod, and names the ones that never did. An annotation, not a label: a
// label value holds at most 63 characters. Comma-separated, in index order.
inline constexpr const char* kGpuUuidsAnnotation = "gpunode.io/gpu-uuids";

// The annotations for this inventory: kGpuUuidsAnnotation.
std::map<std::string, std::string> gpu_annotations_for(
    const GpuInventory& gpus);
// The UUIDs a Node's kGpuUuidsAnnotation lists; empty without one.
std::vector<std::string> published_gpu_uuids(const kube::json& node);

// The labels for this inventory: present, count, and the first GPU's
// product (spaces as '-', as GFD writes "NVIDIA-H200") and memory in MiB.
std::map<std::string, std::string> gpu_labels_for(const GpuInventory& gpus);

// A label value as Kubernetes accepts it (at most 63 characters of
// [A-Za-z0-9-_.], alphanumeric at both ends; apimachinery
// validation.IsValidLabelValue); other characters become '-'.
std::string label_value(const std::string& text);

// The GPU count a node's labels declare, or nullopt when it has none (not
// labelled by gpunode or GFD).
std::optional<int> labelled_gpu_count(const kube::json& node);
bool labelled_gpu_present(const kube::json& node);

// Adds to a pod spec the required node affinity on kGpuPresentLabel=true,
// as NVIDIA's Helm chart has it (to every term of an affinity already
// there, since terms are ORed): the plugin lands on GPU nodes only.
void require_gpu_nodes(kube::json& pod_spec);
// Whether a pod spec already selects on kGpuPresentLabel.
bool selects_gpu_nodes(const kube::json& pod_spec);

}  // namespace gpunode
