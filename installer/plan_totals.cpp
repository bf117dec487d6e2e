#include "plan_totals.hpp"

namespace gpunode {
namespace {

using nlohmann::json;

std::string mib(std::uint64_t bytes) {
  return std::to_string((bytes + 1024 * 1024 - 1) / (1024 * 1024)) + " MiB";
}

void take(const json& from, const char* key, std::vector<std::string>& into) {
  if (!from.contains(key) || !from[key].is_array()) return;
  for (const auto& item : from[key])
    if (item.is_string()) into.push_back(item.get<std::string>());
}

}  // namespace

void PlanTotals::add(const Check& c) {
  const json& f = c.facts;
  if (f.contains("objects") && f["objects"].is_object()) {
    take(f["objects"], "create", create_);
    take(f["objects"], "update", update_);
    take(f["objects"], "delete", delete_);
  }
  if (f.contains("import_bytes") && f["import_bytes"].is_number_unsigned())
    import_bytes_ += f["import_bytes"].get<std::uint64_t>();
  if (f.contains("disk") && f["disk"].is_object()) disk_ = f["disk"];
  if (f.value("dry_run", "") == "accepted") ++accepted_;
  if (f.value("dry_run", "") == "refused") ++refused_;
}

bool PlanTotals::empty() const {
  return create_.empty() && update_.empty() && delete_.empty() &&
         import_bytes_ == 0 && !disk_;
}

json PlanTotals::to_json() const {
  json j{{"objects",
          {{"create", create_}, {"update", update_}, {"delete", delete_}}},
         {"import_bytes", import_bytes_},
         {"dry_run", {{"accepted", accepted_}, {"refused", refused_}}}};
  if (disk_) j["disk"] = *disk_;
  return j;
}

std::string PlanTotals::human() const {
  std::string text = "would create " + std::to_string(create_.size()) +
                     ", update " + std::to_string(update_.size()) +
                     ", delete " + std::to_string(delete_.size()) +
                     " object(s)";
  const int writes = accepted_ + refused_;
  if (writes > 0) {
    text += refused_ == 0 ? " (the API server's dry run accepts them)"
                          : " (the API server's dry run refuses " +
                                std::to_string(refused_) + " stage's writes)";
  }
  text += "; import " + mib(import_bytes_);
  if (disk_) {
    const json& d = *disk_;
    text += "; containerd disk (" + d.value("path", std::string()) +
            "): about " + mib(d.value("needed_bytes", std::uint64_t{0})) +
            " needed";
    if (d.contains("free_bytes") && d["free_bytes"].is_number())
      text += ", " + mib(d["free_bytes"].get<std::uint64_t>()) + " free";
  }
  return text;
}

}  // namespace gpunode
