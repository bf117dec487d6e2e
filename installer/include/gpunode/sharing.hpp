// How the device plugin shares each GPU: the variant (one slot per GPU, or
// time-slicing with N replicas) and the resource name. Flags and site config
// both parse through parse_sharing(), so the bounds and defaults live here
// and nowhere else. A MIG strategy would be one more field.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpunode/result.hpp"

namespace gpunode {

enum class Variant { kDefault, kTimeSlicing };
const char* variant_name(Variant v);

// The device plugin refuses time-slicing with fewer than 2 replicas
// (k8s-device-plugin api/config/v1/replicas.go: "number of replicas must
// be >= 2"); past kMaxReplicas a count is a typo, not a plan: the plugin
// would advertise GPUs x replicas scheduling slots.
inline constexpr int kMinSharedReplicas = 2;
inline constexpr int kMaxReplicas = 1024;
inline constexpr int kDefaultSharedReplicas = 8;

inline constexpr const char* kGpuResource = "nvidia.com/gpu";
// renameByDefault: the plugin appends ".shared" to a time-sliced resource
// (k8s-device-plugin api/config/v1/resources.go DefaultSharedResourceName).
inline constexpr const char* kSharedGpuResource = "nvidia.com/gpu.shared";

struct Sharing {
  Variant variant = Variant::kDefault;
  int replicas = 1;     // slots per GPU: 1 for the default variant
  bool rename = false;  // time-slicing only: advertise nvidia.com/gpu.shared

  // The resource each GPU is advertised as.
  std::string resource() const;
  bool time_slicing() const { return variant == Variant::kTimeSlicing; }
};

// "variant=...\nreplicas=...\nrename_shared=..." (no final newline): the
// part of a stage's journaled inputs that the sharing settings make.
std::string sharing_inputs(const Sharing& sharing);

// Which setting a problem is about, so each caller can name it its own way
// (--replicas, "key 'replicas'", GPUNODE_REPLICAS).
enum class SharingSetting { kVariant, kReplicas, kRename };

struct SharingProblem {
  SharingSetting setting;
  std::string message;  // without the setting's name
};

// "" when fine, else what is wrong with each value on its own, as a
// settings file or variable states it (cli/site_config.cpp).
std::string variant_problem(std::string_view variant);
std::string replicas_problem(long long replicas);

// The one parse: a variant name, an optional replica count and the rename
// switch, each as the operator gave it (or not). Replicas default to
// kDefaultSharedReplicas with time-slicing and are refused, like rename,
// with the default variant.
struct SharingOrProblem {
  std::optional<Sharing> sharing;
  std::optional<SharingProblem> problem;
};
SharingOrProblem parse_sharing(std::string_view variant,
                               std::optional<long long> replicas, bool rename);

}  // namespace gpunode
