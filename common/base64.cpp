// RFC 4648 base64 (common/include/gpunode/base64.hpp).
#include "gpunode/base64.hpp"

#include <array>
#include <cctype>
#include <cstdint>

namespace gpunode {
namespace {

constexpr const char* kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::optional<std::string> decode_base64(const std::string& in) {
  std::array<int, 256> value;
  value.fill(-1);
  for (int i = 0; i < 64; ++i)
    value[static_cast<unsigned char>(kAlphabet[i])] = i;

  std::string clean;
  clean.reserve(in.size());
  for (char c : in) {
    if (!std::isspace(static_cast<unsigned char>(c))) clean.push_back(c);
  }
  if (clean.empty() || clean.size() % 4 != 0) return std::nullopt;

  std::string out;
  out.reserve(clean.size() / 4 * 3);
  for (std::size_t i = 0; i < clean.size(); i += 4) {
    const bool last = i + 4 == clean.size();
    int pad = 0;
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 4; ++j) {
      const char c = clean[i + j];
      if (c == '=') {
        // Padding only at the end of the last group, at most two.
        if (!last || j < 2) return std::nullopt;
        ++pad;
        group <<= 6;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      const int v = value[static_cast<unsigned char>(c)];
      if (v < 0) return std::nullopt;
      group = (group << 6) | static_cast<std::uint32_t>(v);
    }
    out.push_back(static_cast<char>((group >> 16) & 0xff));
    if (pad < 2) out.push_back(static_cast<char>((group >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(group & 0xff));
  }
  return out;
}

std::string encode_base64(const std::string& in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < in.size(); i += 3) {
    const std::size_t n = in.size() - i < 3 ? in.size() - i : 3;
    std::uint32_t group = 0;
    for (std::size_t j = 0; j < 3; ++j)
      group =
          (group << 8) | (j < n ? static_cast<unsigned char>(in[i + j]) : 0u);
    out.push_back(kAlphabet[(group >> 18) & 63]);
    out.push_back(kAlphabet[(group >> 12) & 63]);
    out.push_back(n > 1 ? kAlphabet[(group >> 6) & 63] : '=');
    out.push_back(n > 2 ? kAlphabet[group & 63] : '=');
  }
  return out;
}

}  // namespace gpunode
