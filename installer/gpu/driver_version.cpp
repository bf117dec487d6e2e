#include "gpu/driver_version.hpp"

#include <cctype>
#include <cstdint>
#include <vector>

namespace gpunode {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Components as integers; caller has checked is_dotted_version. Saturates
// rather than overflows on absurdly long components.
std::vector<std::uint64_t> components(std::string_view version) {
  std::vector<std::uint64_t> out{0};
  for (char c : version) {
    if (c == '.') {
      out.push_back(0);
    } else if (out.back() < UINT64_MAX / 10 - 9) {
      out.back() = out.back() * 10 + static_cast<std::uint64_t>(c - '0');
    }
  }
  return out;
}

}  // namespace

bool is_dotted_version(std::string_view version) {
  if (version.empty() || version.front() == '.' || version.back() == '.') {
    return false;
  }
  char previous = '\0';
  for (char c : version) {
    if (c == '.') {
      if (previous == '.') return false;
    } else if (!std::isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
    previous = c;
  }
  return true;
}

std::optional<int> compare_versions(std::string_view a, std::string_view b) {
  if (!is_dotted_version(a) || !is_dotted_version(b)) return std::nullopt;
  const auto x = components(a), y = components(b);
  for (std::size_t i = 0; i < x.size() || i < y.size(); ++i) {
    const std::uint64_t p = i < x.size() ? x[i] : 0;
    const std::uint64_t q = i < y.size() ? y[i] : 0;
    if (p != q) return p < q ? -1 : 1;
  }
  return 0;
}

Result<std::string> parse_proc_driver_version(std::string_view text) {
  constexpr std::string_view kPrefix = "NVRM version:";
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.substr(0, kPrefix.size()) != kPrefix) continue;
    // The first whitespace-separated token that is a dotted version: the
    // words before it vary (Open/proprietary, architecture), and the build
    // date after it holds no dotted number.
    std::size_t i = kPrefix.size();
    while (i < line.size()) {
      while (i < line.size() && is_space(line[i])) ++i;
      std::size_t j = i;
      while (j < line.size() && !is_space(line[j])) ++j;
      std::string_view token = line.substr(i, j - i);
      if (token.find('.') != std::string_view::npos &&
          is_dotted_version(token)) {
        return std::string(token);
      }
      i = j;
    }
    return Error{ExitCode::kUsage,
                 "driver",
                 std::string(kProcDriverVersion) +
                     ": no version number on the NVRM line: '" +
                     std::string(line) + "'",
                 {}};
  }
  return Error{ExitCode::kUsage,
               "driver",
               std::string(kProcDriverVersion) + " has no 'NVRM version:' line",
               {}};
}

std::string driver_branch(std::string_view version) {
  return std::string(version.substr(0, version.find('.')));
}

}  // namespace gpunode
