// Layer probe (meta-layers-*, test/CMakeLists.txt):
// common/ reaches its own headers.
#include "gpunode/host.hpp"
#include "gpunode/result.hpp"
