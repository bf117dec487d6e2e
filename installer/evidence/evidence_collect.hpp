// `gpunode evidence`: builds this node's record (evidence/evidence_record.
// hpp) from a read-only pass over every stage, as `status --json` reports
// it (its documented events are the interface), this host's plan, the
// Node's own versions, the last proof on this host, and gpunode's own
// digest; signs it with the node's key and writes it to
// <state-dir>/evidence/<time>.json, atomically.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "gpunode/host.hpp"
#include "gpunode/options.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

namespace kube {
class Client;
}

// The last proof on this host (the smoke stage writes it after each run):
// <state-dir>/proof.json.
std::string proof_record_path(const std::string& state_dir);

struct WrittenEvidence {
  std::string path;  // a host path
  std::size_t bytes = 0;
  std::string fingerprint;
  nlohmann::json record;
};

// The record for this node; the key must exist (made by the first install).
// `cluster`: a connection to reuse (an install's own), else one is made.
Result<nlohmann::json> collect_evidence(
    Host& host, const Options& opts,
    std::shared_ptr<kube::Client> cluster = nullptr);
Result<WrittenEvidence> write_evidence(
    Host& host, const Options& opts,
    std::shared_ptr<kube::Client> cluster = nullptr);

}  // namespace gpunode
