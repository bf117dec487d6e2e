#include "exposure/gpu_exposure.hpp"

#include <algorithm>
#include <stdexcept>

#include "gpunode/text.hpp"

namespace gpunode {

// builtin_exposures.cpp: the strategies gpunode ships.
std::vector<ExposureKind> builtin_exposures();

namespace {

std::vector<ExposureKind>& kinds() {
  static std::vector<ExposureKind> all = builtin_exposures();
  return all;
}

}  // namespace

std::string GpuExposure::install_flags() const {
  return " --variant " + name();
}

kube::json GpuExposure::facts() const {
  return {{"variant", name()},
          {"replicas", slots_per_gpu()},
          {"resource", resource()}};
}

std::string GpuExposure::describe() const {
  return name() + ", " + std::to_string(slots_per_gpu()) +
         " slot(s) per GPU as " + resource();
}

const std::vector<ExposureKind>& exposure_kinds() { return kinds(); }

ExposureRegistration::ExposureRegistration(ExposureKind kind)
    : name_(kind.name) {
  if (find_exposure_kind(name_) != nullptr)
    throw std::logic_error("exposure '" + name_ + "' is registered already");
  kinds().push_back(std::move(kind));
}

ExposureRegistration::~ExposureRegistration() {
  auto& all = kinds();
  all.erase(
      std::remove_if(all.begin(), all.end(),
                     [&](const ExposureKind& k) { return k.name == name_; }),
      all.end());
}

const ExposureKind* find_exposure_kind(std::string_view name) {
  for (const ExposureKind& k : kinds())
    if (k.name == name) return &k;
  return nullptr;
}

std::string exposure_choices(bool with_summaries) {
  const auto& all = kinds();
  std::string out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i > 0) out += i + 1 == all.size() ? " or " : ", ";
    out += "'" + all[i].name + "'";
    if (with_summaries) out += " (" + all[i].summary + ")";
  }
  return out;
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

std::shared_ptr<const GpuExposure> make_exposure(const Sharing& settings) {
  const ExposureKind* kind = find_exposure_kind(settings.variant.name);
  // Settings come from parse_sharing() or recognize_exposure(), which name
  // only registered strategies.
  if (kind == nullptr)
    throw std::logic_error("no exposure '" + settings.variant.name + "'");
  return kind->make(settings);
}

Result<Sharing> recognize_exposure(const kube::json& pod_spec,
                                   const std::optional<kube::json>& configmap) {
  for (const ExposureKind& k : kinds()) {
    if (!k.recognize) continue;
    if (auto found = k.recognize(pod_spec, configmap)) return *found;
  }
  Sharing fallback;
  fallback.variant = Variant{kinds().front().name};
  return fallback;
}

}  // namespace gpunode
