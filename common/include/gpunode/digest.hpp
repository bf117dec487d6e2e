// SHA-256 and lower-case hex, the one implementation of each (OpenSSL EVP).
// Bundle manifests, image digests, registry pulls and the journal's input
// digests all use it, so it belongs to neither bundle/ nor installer/.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gpunode/openssl_handles.hpp"

namespace gpunode {

// Two lower-case hex digits per byte.
std::string hex_lower(const unsigned char* bytes, std::size_t n);

// The SHA-256 of `data` as 64 lower-case hex digits (no "sha256:" prefix).
std::string sha256_hex(std::string_view data);

// SHA-256 over a stream of bytes. ok() is false when OpenSSL could not
// start or update the digest; hex() then returns "".
class Sha256 {
 public:
  Sha256();  // ready for update()
  bool ok() const { return ok_; }
  // Starts afresh, dropping what update() saw; returns ok().
  bool reset();
  void update(const void* data, std::size_t n);
  // The digest of what update() saw; the object then starts afresh.
  std::string hex();

 private:
  EvpMdCtxPtr ctx_;
  bool ok_ = false;
};

}  // namespace gpunode
