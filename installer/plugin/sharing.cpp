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

std::string replicas_problem(long long n) {
  if (n >= kMinSharedReplicas && n <= kMaxReplicas) return "";
  return "expected " + std::to_string(kMinSharedReplicas) + " to " +
         std::to_string(kMaxReplicas) + " slots per GPU, got " +
         std::to_string(n);
}

}  // namespace gpunode
