// Deterministic crash points for the crash-anywhere tests (test/e2e/
// crash_convergence_test.cpp). With GPUNODE_TEST_HOOKS compiled in (the
// default for development builds; packaging/ builds turn it off) and
// GPUNODE_TEST_CRASH_AT=NAME[@N] in the environment, the Nth time (default
// 1st) the run passes point NAME it dies with SIGKILL, as on a power cut;
// with GPUNODE_TEST_CRASH_SIGNAL=INT or TERM it sends itself that signal
// instead and carries on, as if the operator pressed Ctrl-C right there.
// Without the hooks the calls compile to nothing.
#pragma once

#include <sys/types.h>

#include <string>

namespace gpunode {

#ifdef GPUNODE_TEST_HOOKS
inline constexpr bool kTestHooks = true;
void crash_point(const std::string& name);
// After spawning `child` (its own process group): a crash here takes the
// child's group with it, as a power cut would.
void crash_point(const std::string& name, pid_t child);
#else
inline constexpr bool kTestHooks = false;
inline void crash_point(const std::string&) {}
inline void crash_point(const std::string&, pid_t) {}
#endif

}  // namespace gpunode
