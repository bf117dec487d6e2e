// libFuzzer target: nvidia-smi's CSV answer, parsed directly and through
// query_nvidia_smi with the tests' one fake runner (which also classifies
// nvidia-smi's failure texts). The first byte picks the fake's exit code.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/nvidia_smi.hpp"
#include "scripted_runner.hpp"

namespace {

using FakeRunner = gpunode::test::ScriptedRunner;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)gpunode::parse_query_gpu_csv(text);

  if (size == 0) return 0;
  // nvidia-smi's real exit codes (0, 6, 9, 18) and a few others.
  static constexpr int kExits[] = {0, 0, 0, 6, 9, 18, 1, 2, 255, -1};
  gpunode::ProcessResult r;
  r.exit_code = kExits[data[0] % (sizeof(kExits) / sizeof(kExits[0]))];
  r.out = std::string(text.substr(1));
  r.err = r.exit_code == 0 ? std::string() : r.out;
  FakeRunner runner(r);
  auto answer =
      gpunode::query_nvidia_smi(runner, std::chrono::milliseconds(1000));
  (void)gpunode::smi_outcome_name(answer.outcome);
  return 0;
}
