// Who may have made a bundle: the publisher keys given with --trust-key and
// those installed once on the node under /etc/gpunode/trusted-keys/*.pub.
// Shared by `bundle verify` and `install --bundle`, so both apply one policy:
// no trusted key and no explicit --insecure-skip-signature is a refusal.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gpunode/bundle.hpp"
#include "gpunode/host.hpp"

namespace gpunode::bundle {

inline constexpr const char* kTrustedKeysDir = "/etc/gpunode/trusted-keys";
// An Ed25519 key file in PEM is a few hundred bytes.
inline constexpr std::size_t kMaxKeyBytes = 64 * 1024;

// A key file named on the command line (a real path, not under --root),
// capped at `max_bytes` (a larger file is "too large for `what`"); errors
// are usage errors naming `flag`. What was read of a file refused is wiped:
// it may hold secrets (a registry auth file is read this way too).
Result<std::string> read_key_file(const std::string& path,
                                  const std::string& flag,
                                  std::size_t max_bytes = kMaxKeyBytes,
                                  const std::string& what = "a key");

// Reads the keys (the named files are real paths; the directory is a host
// path under `fs`'s root) and builds the verification options. Errors:
// ExitCode::kUsage for an unreadable or non-Ed25519 key, and for
// `insecure_skip_signature` while any key is trusted (`keys_origin` names
// where `key_files` came from: "--trust-key", "GPUNODE_TRUST_KEYS", the
// config file's line); ExitCode::kCannotRun for a key or directory others
// may write (trust_anchor.hpp); ExitCode::kIntegrity when there is no
// trusted key and skipping was not asked for.
Result<VerifyOptions> trust_options(const FileSystem& fs,
                                    const std::vector<std::string>& key_files,
                                    bool insecure_skip_signature,
                                    const std::string& keys_origin);

}  // namespace gpunode::bundle
