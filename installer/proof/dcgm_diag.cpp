#include "proof/dcgm_diag.hpp"

#include "gpunode/terminal_text.hpp"
#include "gpunode/text.hpp"

namespace gpunode {

namespace {

using nlohmann::json;

int rank(const std::string& status) {
  if (status == "Fail") return 3;
  if (status == "Warn") return 2;
  if (status == "Pass") return 1;
  return 0;  // Skip, Not Run, anything else
}

std::string worse(const std::string& a, const std::string& b) {
  return rank(b) > rank(a) || a.empty() ? b : a;
}

std::string id_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  return {};
}

// A test object: {"name": ..., "results": [{"status", "gpu_id"|"gpu_ids"|
// "entity_id"}]} (DCGM 3 and 4 name the GPU differently); found wherever
// it nests, so the category layer's name does not matter.
void collect(const json& j, DcgmDiag& out, int depth) {
  if (depth > 12) return;
  if (j.is_array()) {
    for (const auto& e : j) collect(e, out, depth + 1);
    return;
  }
  if (!j.is_object()) return;
  if (j.contains("name") && j["name"].is_string() && j.contains("results") &&
      j["results"].is_array()) {
    std::string test_status;
    for (const auto& r : j["results"]) {
      if (!r.is_object() || !r.contains("status") || !r["status"].is_string())
        continue;
      const std::string s = r["status"].get<std::string>();
      test_status = worse(test_status, s);
      for (const char* key : {"gpu_id", "gpu_ids", "entity_id"}) {
        if (!r.contains(key)) continue;
        const std::string gpu = id_text(r[key]);
        if (!gpu.empty()) out.gpus[gpu] = worse(out.gpus[gpu], s);
      }
    }
    if (!test_status.empty())
      out.tests.push_back(
          {{"name", terminal_safe(j["name"].get<std::string>())},
           {"status", terminal_safe(test_status)}});
    return;
  }
  for (const auto& [key, value] : j.items()) collect(value, out, depth + 1);
}

}  // namespace

DcgmDiag read_dcgm_json(const std::string& text, int level) {
  DcgmDiag out;
  out.level = level;
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    out.state = "error";
    out.message = "dcgmi diag -r " + std::to_string(level) +
                  " printed no JSON: " + terminal_safe(first_line_of(text));
    return out;
  }
  collect(j, out, 0);
  if (out.tests.empty()) {
    out.state = "error";
    out.message =
        "dcgmi diag -r " + std::to_string(level) + " reported no test results";
    return out;
  }
  int failed = 0;
  for (const auto& t : out.tests) failed += t.value("status", "") == "Fail";
  out.state = failed > 0 ? "failed" : "passed";
  out.message = "DCGM diagnostic level " + std::to_string(level) + ": " +
                std::to_string(out.tests.size()) + " test(s), " +
                std::to_string(failed) + " failed";
  return out;
}

DcgmDiag run_dcgm_diag(ProcessRunner& proc, int level,
                       std::chrono::milliseconds timeout) {
  DcgmDiag out;
  if (!proc.which("dcgmi")) {
    out.message = "DCGM is not installed on this host (no dcgmi): not run";
    return out;
  }
  // Asks the host engine; without one, dcgmi cannot run a diagnostic.
  const ProcessResult engine =
      proc.run({"dcgmi", "discovery", "-l"}, std::chrono::seconds(20));
  if (engine.exit_code != 0) {
    out.state = "no-host-engine";
    out.message =
        "dcgmi is installed but its host engine does not answer (start "
        "nv-hostengine, e.g. systemctl start nvidia-dcgm): not run";
    return out;
  }
  const ProcessResult diag =
      proc.run({"dcgmi", "diag", "-r", std::to_string(level), "-j"}, timeout);
  if (diag.timed_out || diag.interrupted) {
    out.state = "error";
    out.level = level;
    out.message = std::string("dcgmi diag -r ") + std::to_string(level) +
                  (diag.interrupted ? " was interrupted" : " timed out");
    return out;
  }
  // dcgmi exits non-zero when a test fails; its JSON says which.
  return read_dcgm_json(diag.out, level);
}

}  // namespace gpunode
