#include "gpunode/text.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace gpunode {

std::string_view trim_space(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::string join(const std::vector<std::string>& items,
                 std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += separator;
    out += items[i];
  }
  return out;
}

std::string human_bytes(std::uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else if (b >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
  else if (b >= (1ull << 10))
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / double(1ull << 10));
  else
    std::snprintf(buf, sizeof buf, "%llu bytes",
                  static_cast<unsigned long long>(b));
  return buf;
}

std::string shell_word(std::string_view word) {
  const auto plain = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
  };
  if (!word.empty() && std::all_of(word.begin(), word.end(), plain))
    return std::string(word);
  std::string out = "'";
  for (char c : word)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string quoted_value(std::string_view value) {
  if (value.size() <= kEchoLimit) return "'" + std::string(value) + "'";
  std::size_t cut = kEchoLimit;
  // Back up over UTF-8 continuation bytes (10xxxxxx) to a character start.
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80)
    --cut;
  return "'" + std::string(value.substr(0, cut)) + "...' (" +
         std::to_string(value.size()) + " bytes)";
}

}  // namespace gpunode
