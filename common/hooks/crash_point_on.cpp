#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "gpunode/crash_point.hpp"

namespace gpunode {
namespace {

struct Target {
  std::string name;
  int nth = 1;
  int signal = SIGKILL;
};

const Target* target() {
  static const Target* t = []() -> const Target* {
    const char* at = std::getenv("GPUNODE_TEST_CRASH_AT");
    if (at == nullptr || *at == '\0') return nullptr;
    auto* t = new Target;
    std::string spec = at;
    if (auto pos = spec.rfind('@'); pos != std::string::npos) {
      t->nth = std::atoi(spec.c_str() + pos + 1);
      spec.resize(pos);
    }
    t->name = spec;
    const char* sig = std::getenv("GPUNODE_TEST_CRASH_SIGNAL");
    const std::string s = sig ? sig : "";
    if (s == "INT") t->signal = SIGINT;
    if (s == "TERM") t->signal = SIGTERM;
    // STOP: the test changes the world while the run is frozen at the
    // point (pulls the USB stick), then sends SIGCONT.
    if (s == "STOP") t->signal = SIGSTOP;
    return t;
  }();
  return t;
}

bool hit(const std::string& name) {
  const Target* t = target();
  if (t == nullptr || t->name != name) return false;
  static std::mutex mu;
  static int count = 0;
  std::lock_guard<std::mutex> lock(mu);
  return ++count == t->nth;
}

}  // namespace

bool crash_points_compiled_in() { return true; }

void crash_point(const std::string& name) { crash_point(name, 0); }

void crash_point(const std::string& name, pid_t child) {
  if (!hit(name)) return;
  const int sig = target()->signal;
  if (sig == SIGKILL) {
    if (child > 0) ::kill(-child, SIGKILL);
    ::kill(::getpid(), SIGKILL);
  }
  ::kill(::getpid(), sig);
}

}  // namespace gpunode
