#include "gpunode/sharing.hpp"

#include "exposure/gpu_exposure.hpp"
#include "gpunode/text.hpp"

namespace gpunode {

const char* variant_name(const Variant& v) { return v.name.c_str(); }

std::string Sharing::resource() const {
  return make_exposure(*this)->resource();
}

std::string sharing_inputs(const Sharing& s) {
  return "variant=" + s.variant.name +
         "\nreplicas=" + std::to_string(s.replicas) +
         "\nrename_shared=" + (s.rename ? "true" : "false");
}

std::string variant_problem(std::string_view variant) {
  return find_exposure_kind(variant) != nullptr
             ? ""
             : "unknown variant " + quoted_value(variant) + " (choose " +
                   exposure_choices() + ")";
}

bool variant_takes_replicas(std::string_view variant) {
  const ExposureKind* kind = find_exposure_kind(variant);
  return kind != nullptr && !kind->settle(2, false).problem;
}

std::string replicas_problem(long long n) {
  if (n >= kMinSharedReplicas && n <= kMaxReplicas) return "";
  return "expected " + std::to_string(kMinSharedReplicas) + " to " +
         std::to_string(kMaxReplicas) + " slots per GPU, got " +
         std::to_string(n);
}

SharingOrProblem parse_sharing(std::string_view variant,
                               std::optional<long long> replicas, bool rename) {
  const ExposureKind* kind = find_exposure_kind(variant);
  if (kind == nullptr) {
    return {std::nullopt,
            SharingProblem{SharingSetting::kVariant, variant_problem(variant)}};
  }
  SharingOrProblem out = kind->settle(replicas, rename);
  if (out.sharing) out.sharing->variant = Variant{kind->name};
  return out;
}

}  // namespace gpunode
