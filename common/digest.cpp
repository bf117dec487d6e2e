// SHA-256 and hex (common/include/gpunode/digest.hpp).
#include "gpunode/digest.hpp"

namespace gpunode {

std::string hex_lower(const unsigned char* bytes, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return hex_lower(md, len);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) { reset(); }

bool Sha256::reset() {
  ok_ = ctx_ && EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1;
  return ok_;
}

void Sha256::update(const void* data, std::size_t n) {
  if (ok_) ok_ = EVP_DigestUpdate(ctx_.get(), data, n) == 1;
}

std::string Sha256::hex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const bool done = ok_ && EVP_DigestFinal_ex(ctx_.get(), md, &len) == 1;
  reset();
  return done ? hex_lower(md, len) : std::string();
}

}  // namespace gpunode
