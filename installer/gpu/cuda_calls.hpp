// The child's half of the CUDA probe (cuda_probe.cpp forks it): opens
// libcuda and makes the driver API calls, telling the parent on a pipe what
// it is about to call and what came back, so that a call that hangs or
// crashes is still named. One line per report:
//   <kind>\t<field>\t<field>...\n
// with '\\', '\t' and '\n' inside a field escaped (escape_field), since the
// library's texts and the device names are not ours.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpunode::cuda_calls {

// The kinds of line, in the order they come.
inline constexpr std::string_view kLoadFailed = "nolib";  // dlerror text
inline constexpr std::string_view kMissing = "missing";   // symbol names
inline constexpr std::string_view kAt = "at";             // call about to run
inline constexpr std::string_view kVersion = "version";   // driver API version
inline constexpr std::string_view kCount = "count";       // devices
inline constexpr std::string_view kDevice = "device";     // index, name
inline constexpr std::string_view kDeviceOk = "ok";       // index
inline constexpr std::string_view kFailed = "fail";  // call, code, name, text
inline constexpr std::string_view kMismatch = "mismatch";  // call
inline constexpr std::string_view kDone = "done";  // every device passed

// Bytes copied to each GPU and back.
inline constexpr std::size_t kCopyBytes = 1 << 20;

// Runs the probe against `library`, writing its lines to `fd`, and ends the
// process with _exit(0) (never returns: atexit handlers and stdio buffers
// are the parent's, copied by fork).
[[noreturn]] void run_and_exit(const std::string& library, int fd);

std::string escape_field(std::string_view text);
std::string unescape_field(std::string_view text);
// One line (without its '\n') as its kind and fields, unescaped.
std::vector<std::string> split_line(std::string_view line);

}  // namespace gpunode::cuda_calls
