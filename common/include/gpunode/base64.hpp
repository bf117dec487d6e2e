// RFC 4648 base64 (the standard alphabet, with padding), the one
// implementation of each direction: kubeconfigs embed certificates in it,
// registry auth files (containers-auth.json(5)) hold "user:password" in it,
// and HTTP Basic credentials are sent in it (RFC 7617).
#pragma once

#include <optional>
#include <string>

namespace gpunode {

// Whitespace is skipped (YAML block scalars wrap long values); anything
// else outside the alphabet, or bad padding, is nullopt rather than a guess.
std::optional<std::string> decode_base64(const std::string& in);

// Padded, no line breaks.
std::string encode_base64(const std::string& in);

}  // namespace gpunode
