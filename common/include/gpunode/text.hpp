// Small text helpers every part of gpunode uses: one owner for trimming and
// joining, so a message list reads the same wherever it is made.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpunode {

// `s` without leading and trailing spaces, tabs, CRs and newlines.
std::string_view trim_space(std::string_view s);

// The items with `separator` between them: {"a", "b"} -> "a, b".
std::string join(const std::vector<std::string>& items,
                 std::string_view separator = ", ");

// A size for people: "512 bytes", "26.4 KiB", "154.7 MiB", "1.25 GiB".
std::string human_bytes(std::uint64_t bytes);

// A value someone typed, quoted for an error message: 'value', or when it is
// longer than kEchoLimit bytes its start and its size ('aaaa...' (20000
// bytes)), so a pasted file or a runaway variable does not flood the
// terminal or the journal. The cut falls on a UTF-8 character boundary.
inline constexpr std::size_t kEchoLimit = 64;
std::string quoted_value(std::string_view value);

// `word` as one word of a POSIX shell command line, for the fix lines that
// tell the operator what to run: unchanged when it holds only characters
// no shell treats specially, else in single quotes ('/media/my stick' ->
// '/media/my stick', it's -> 'it'\''s'), so a pasted fix never splits a
// path with a space or runs what a file name holds.
std::string shell_word(std::string_view word);

}  // namespace gpunode
