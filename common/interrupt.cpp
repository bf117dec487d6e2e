#include "gpunode/interrupt.hpp"

#include <signal.h>

#include <csignal>
#include <cstring>

namespace gpunode {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_count = 0;
// SecondSignalHolds alive: set and read on the main thread, read here.
volatile std::sig_atomic_t g_holds = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0 && g_holds == 0) {
    // The second one: the operator means it. Default action, re-raised.
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  if (g_signal == 0) g_signal = sig;
  ++g_count;
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: a blocking poll/read/sleep returns EINTR, so the loops
  // around them see the flag without waiting for their timeout.
  sa.sa_flags = 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

int interrupted() { return g_signal; }

int stop_signals() { return g_count; }

SecondSignalHold::SecondSignalHold() { ++g_holds; }
SecondSignalHold::~SecondSignalHold() { --g_holds; }

namespace {
int g_shields = 0;  // the run is single-threaded where shields are raised
}  // namespace

bool stop_requested() { return g_signal != 0 && g_shields == 0; }

InterruptShield::InterruptShield() { ++g_shields; }
InterruptShield::~InterruptShield() { --g_shields; }

Error interrupted_error(const std::string& layer) {
  return Error{ExitCode::kInterrupted, layer,
               "interrupted by " + signal_name(interrupted()) +
                   "; what was being written was finished or undone",
               "run the same command again: it checks every layer and goes "
               "on from here"};
}

void reset_interrupt_for_tests() {
  g_signal = 0;
  g_count = 0;
}

}  // namespace gpunode
