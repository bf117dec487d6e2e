// DCGM's diagnostic, when the host has DCGM: `dcgmi diag -r 1` (deployment
// checks, seconds), or -r 2 with --proof deep (about 2 minutes), its JSON
// (-j) read per test and per GPU (FACTS.md, "Proof and evidence"). gpunode
// never installs DCGM: where dcgmi is missing, or its host engine
// (nv-hostengine) does not answer, the result says so, and that is no
// failure.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "gpunode/host.hpp"

namespace gpunode {

struct DcgmDiag {
  // "absent" (no dcgmi on PATH), "no-host-engine", "passed", "failed",
  // "error" (dcgmi ran but said nothing readable).
  std::string state = "absent";
  int level = 0;        // the -r it ran at; 0 when it did not run
  std::string message;  // one line for the report, escaped
  // [{"name", "status"}]: each test's worst status (Pass, Skip, Warn, Fail).
  nlohmann::json tests = nlohmann::json::array();
  // The worst status per GPU (DCGM's GPU id, its index) of the tests that
  // name one.
  std::map<std::string, std::string> gpus;
  bool failed() const { return state == "failed" || state == "error"; }
};

DcgmDiag run_dcgm_diag(ProcessRunner& proc, int level,
                       std::chrono::milliseconds timeout);

// dcgmi diag -j's output read: tests and GPUs (state passed or failed), or
// state "error" when it is not that JSON.
DcgmDiag read_dcgm_json(const std::string& text, int level);

}  // namespace gpunode
