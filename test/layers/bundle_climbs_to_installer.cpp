// Layer probe (meta-layers-*, test/CMakeLists.txt):
// bundle/ climbing to an installer/ header.
#include "../../installer/include/gpunode/stage.hpp"
