// Deterministic crash points for the crash-anywhere tests (test/e2e/
// crash_convergence_test.cpp). The core library calls them; what they do is
// decided at link time: the shipped `gpunode` links installer/hooks/
// crash_point_off.cpp (they do nothing), the test build `gpunode_hooked`
// links crash_point_on.cpp. There, with GPUNODE_TEST_CRASH_AT=NAME[@N] in
// the environment, the Nth time (default 1st) the run passes point NAME it
// dies with SIGKILL, as on a power cut; with GPUNODE_TEST_CRASH_SIGNAL=INT
// or TERM it sends itself that signal instead and carries on, as if the
// operator pressed Ctrl-C right there; with STOP it stops itself until a
// SIGCONT, so a test can change the world at that point (pull the stick).
#pragma once

#include <sys/types.h>

#include <string>

namespace gpunode {

bool crash_points_compiled_in();
void crash_point(const std::string& name);
// After spawning `child` (its own process group): a crash here takes the
// child's group with it, as a power cut would.
void crash_point(const std::string& name, pid_t child);

}  // namespace gpunode
