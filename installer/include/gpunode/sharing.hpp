// The operator's exposure settings as a value: the variant (the strategy's
// name, as --variant gives it), the replicas and the rename switch. The
// registry (exposure/gpu_exposure.hpp) hands them to the strategy the
// variant names, which settles them (parse_sharing) and says what they mean
// (resource, slots, objects); this file holds only the value and its
// bounds.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpunode/result.hpp"

namespace gpunode {

// A strategy's name. kDefault and kTimeSlicing are the built-in ones;
// another comes from the exposure registry by its name.
struct Variant {
  std::string name = "default";
  static const Variant kDefault;
  static const Variant kTimeSlicing;
};
inline const Variant Variant::kDefault{"default"};
inline const Variant Variant::kTimeSlicing{"time-slicing"};
inline bool operator==(const Variant& a, const Variant& b) {
  return a.name == b.name;
}
inline bool operator!=(const Variant& a, const Variant& b) { return !(a == b); }
const char* variant_name(const Variant& v);

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

  // The resource each GPU is advertised as (the strategy's).
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

// "" when fine, else what is wrong with the count on its own, as a
// settings file or variable states it (cli/site_config.cpp).
std::string replicas_problem(long long replicas);

// A settled sharing, or what is wrong with the settings given.
struct SharingOrProblem {
  std::optional<Sharing> sharing;
  std::optional<SharingProblem> problem;
};

}  // namespace gpunode
