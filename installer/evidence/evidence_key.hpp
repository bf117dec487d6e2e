// This node's evidence key: an Ed25519 key pair (the bundle's own tooling,
// gpunode/bundle.hpp) made at the first install and kept in the state dir,
// the private half root-only (0600). The labels stage publishes the public
// half on the Node (kEvidenceKeyAnnotation) with the node's own identity,
// so the cluster vouches for which key belongs to which node; `gpunode
// evidence` signs this node's records with it (evidence/evidence_record.hpp).
#pragma once

#include <optional>
#include <string>

#include "gpunode/host.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

inline constexpr const char* kEvidenceKeyAnnotation = "gpunode.io/evidence-key";

std::string evidence_private_path(const std::string& state_dir);
std::string evidence_public_path(const std::string& state_dir);

// The public key (PEM), or nullopt when none was made yet. A public file
// without its private half, or a private one others may read, is an
// error (exit 5, with the fix).
Result<std::optional<std::string>> read_evidence_public(
    const FileSystem& fs, const std::string& state_dir);
// The private key (PEM): checked 0600 and root's first.
Result<std::string> read_evidence_private(const FileSystem& fs,
                                          const std::string& state_dir);
// Makes the pair when there is none (the private half first, atomically,
// 0600), and returns the public key either way.
Result<std::string> ensure_evidence_key(FileSystem& fs,
                                        const std::string& state_dir);

}  // namespace gpunode
