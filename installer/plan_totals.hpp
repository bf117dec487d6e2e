// What plan (and install --dry-run) adds up from the stages' checks: the
// objects install would create, update and delete, the bytes it would
// import, containerd's disk needed and free, and how the API server's dry
// run answered. One human line, and the result event's "plan" field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/stage.hpp"

namespace gpunode {

class PlanTotals {
 public:
  // Takes the facts of one stage's check (Check::facts).
  void add(const Check& c);
  bool empty() const;
  nlohmann::json to_json() const;
  std::string human() const;

 private:
  std::vector<std::string> create_, update_, delete_;
  std::uint64_t import_bytes_ = 0;
  std::optional<nlohmann::json> disk_;
  int accepted_ = 0;  // stages whose writes the dry run accepted
  int refused_ = 0;
};

}  // namespace gpunode
