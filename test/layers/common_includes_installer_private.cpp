// Layer probe (meta-layers-*, test/CMakeLists.txt):
// common/ naming an installer/ private header.
#include "stages/stages.hpp"
