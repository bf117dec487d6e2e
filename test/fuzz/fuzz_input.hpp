// Shared by the fuzz targets that need more than one document per input
// (an archive's files, a watch's list body and streams): the input is split
// at lines that hold only "--", so seeds stay readable text files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpunode::fuzz {

inline std::vector<std::string> split_parts(const std::uint8_t* data,
                                            std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSep = "\n--\n";
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = in.find(kSep, start);
    if (at == std::string_view::npos) {
      parts.emplace_back(in.substr(start));
      return parts;
    }
    parts.emplace_back(in.substr(start, at - start));
    start = at + kSep.size();
  }
}

}  // namespace gpunode::fuzz
