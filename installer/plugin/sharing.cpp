#include "gpunode/sharing.hpp"

namespace gpunode {

const char* variant_name(Variant v) {
  return v == Variant::kTimeSlicing ? "time-slicing" : "default";
}

std::string Sharing::resource() const {
  return time_slicing() && rename ? kSharedGpuResource : kGpuResource;
}

std::string sharing_inputs(const Sharing& s) {
  return std::string("variant=") + variant_name(s.variant) +
         "\nreplicas=" + std::to_string(s.replicas) +
         "\nrename_shared=" + (s.rename ? "true" : "false");
}

std::string variant_problem(std::string_view variant) {
  return variant == "default" || variant == "time-slicing"
             ? ""
             : "unknown variant '" + std::string(variant) +
                   "' (choose 'default' or 'time-slicing')";
}

std::string replicas_problem(long long n) {
  if (n >= kMinSharedReplicas && n <= kMaxReplicas) return "";
  return "expected " + std::to_string(kMinSharedReplicas) + " to " +
         std::to_string(kMaxReplicas) + " slots per GPU, got " +
         std::to_string(n);
}

SharingOrProblem parse_sharing(std::string_view variant,
                               std::optional<long long> replicas, bool rename) {
  auto refuse = [](SharingSetting s, std::string message) {
    return SharingOrProblem{std::nullopt,
                            SharingProblem{s, std::move(message)}};
  };
  if (std::string p = variant_problem(variant); !p.empty())
    return refuse(SharingSetting::kVariant, p);
  Sharing out;
  if (variant == "default") {
    if (replicas) {
      return refuse(SharingSetting::kReplicas,
                    "applies only to --variant time-slicing (the default "
                    "manifest advertises one slot per GPU)");
    }
    if (rename)
      return refuse(SharingSetting::kRename,
                    "applies only to --variant time-slicing");
    return {out, std::nullopt};
  }
  out.variant = Variant::kTimeSlicing;
  const long long n = replicas.value_or(kDefaultSharedReplicas);
  if (n < kMinSharedReplicas) {
    return refuse(SharingSetting::kReplicas,
                  "time-slicing needs at least " +
                      std::to_string(kMinSharedReplicas) +
                      " replicas (the device plugin rejects fewer), got " +
                      std::to_string(n));
  }
  if (n > kMaxReplicas) {
    return refuse(SharingSetting::kReplicas,
                  std::to_string(n) + " is more than " +
                      std::to_string(kMaxReplicas) + " slots per GPU");
  }
  out.replicas = static_cast<int>(n);
  out.rename = rename;
  return {out, std::nullopt};
}

}  // namespace gpunode
