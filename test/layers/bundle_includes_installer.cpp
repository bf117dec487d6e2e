// Layer probe (meta-layers-*, test/CMakeLists.txt):
// bundle/ naming an installer/ header.
#include "gpunode/stage.hpp"
