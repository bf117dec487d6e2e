// Layer probe (meta-layers-*, test/CMakeLists.txt):
// common/ naming a bundle/ header.
#include "gpunode/bundle.hpp"
