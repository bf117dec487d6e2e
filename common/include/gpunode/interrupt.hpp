// Ctrl-C (SIGINT), SIGTERM (systemd, kill) and SIGHUP (the SSH session to the
// node dropped) during install or uninstall. The handler only raises a flag;
// the run notices it at the next safe point (between stages, in the wait
// loops, in the child-process and HTTP loops), lets the write in flight
// finish or undo itself (a journal write is one rename, an API write one
// request, a half-done image import is removed), records the interruption
// in the journal, releases the run lock and exits 130. A second signal
// while the first is being handled kills the process at once, as operators
// expect from a second Ctrl-C, except while a package manager's transaction
// runs (SecondSignalHold): gpunode stays to see it end.
#pragma once

#include <string>

#include "gpunode/result.hpp"

namespace gpunode {

// Installs the handlers (idempotent). Only the mutating commands call it;
// read-only ones keep the default (die at once: nothing to clean up).
void install_interrupt_handlers();

// The signal that asked us to stop, or 0.
int interrupted();

// How many stop signals arrived: the first, and each one after it.
int stop_signals();

// While one is alive, a second signal does not kill gpunode either: it only
// counts (stop_signals). For a child that must never be cut, a package
// manager's transaction (ProcessRunner::run_uncut): gpunode waits for it to
// end and reports how it ended; only SIGKILL stops gpunode then.
class SecondSignalHold {
 public:
  SecondSignalHold();
  ~SecondSignalHold();
  SecondSignalHold(const SecondSignalHold&) = delete;
  SecondSignalHold& operator=(const SecondSignalHold&) = delete;
};

// Whether work in progress should stop now: a signal arrived and no
// InterruptShield is up. Child processes, HTTP transfers and retry loops
// check this; the stage loop checks interrupted().
bool stop_requested();

// While one is alive, stop_requested() is false: the clean-up that undoes a
// half-done step (removing a cut image import) must itself run to the end.
class InterruptShield {
 public:
  InterruptShield();
  ~InterruptShield();
  InterruptShield(const InterruptShield&) = delete;
  InterruptShield& operator=(const InterruptShield&) = delete;
};

// "SIGINT", "SIGKILL", ... (the common ones), or "signal N". Defined in
// host/process_failure.cpp, which words a child's death by signal with it.
std::string signal_name(int sig);

// ExitCode::kInterrupted naming the signal and where the run stopped.
Error interrupted_error(const std::string& layer);

// Tests only: forget a caught signal.
void reset_interrupt_for_tests();

}  // namespace gpunode
