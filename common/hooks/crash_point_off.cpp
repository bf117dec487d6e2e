// The crash points of a shipped binary: nothing. `gpunode` links this file;
// only the test build `gpunode_hooked` (and the unit tests) link
// crash_point_on.cpp, so an operator's binary cannot be made to crash by
// its environment.
#include "gpunode/crash_point.hpp"

namespace gpunode {

bool crash_points_compiled_in() { return false; }
void crash_point(const std::string&) {}
void crash_point(const std::string&, pid_t) {}

}  // namespace gpunode
