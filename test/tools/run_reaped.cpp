// run_reaped CMD [ARGS...]: runs CMD (ctest, in scripts/test.sh) as a child
// subreaper (prctl PR_SET_CHILD_SUBREAPER), so every process the tests start
// stays a descendant of this one, even one whose parent died (a grandchild
// reparented instead of going to init). When CMD has exited, anything still
// running under us was left behind by a test: listed, killed and failed.
// Fixtures shared within one test binary (containerd, the registry, the
// simulated API server) end with that binary, before CMD exits, so they are
// never counted.
//
// Exit: CMD's status when it failed; else 1 when processes were left; else 0.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "proc_table.hpp"

namespace {

pid_t g_child = -1;

void forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

// Our living descendants (zombies are only waiting to be reaped).
std::set<pid_t> descendants() {
  const auto table = gpunode::test::proc_table();
  std::set<pid_t> running;
  for (pid_t pid : gpunode::test::tree_of(::getpid(), table)) {
    if (pid != ::getpid() && table.at(pid).running()) running.insert(pid);
  }
  return running;
}

std::string command_line(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string raw((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  std::string out;
  for (char c : raw) {
    const auto u = static_cast<unsigned char>(c);
    out += c == '\0' ? ' ' : (u < 0x20 || u == 0x7f ? '?' : c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? "?" : out;
}

void reap_all() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: run_reaped CMD [ARGS...]\n");
    return 2;
  }
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    std::perror("run_reaped: prctl(PR_SET_CHILD_SUBREAPER)");
    return 2;
  }
  g_child = ::fork();
  if (g_child < 0) {
    std::perror("run_reaped: fork");
    return 2;
  }
  if (g_child == 0) {
    ::execvp(argv[1], argv + 1);
    std::perror("run_reaped: exec");
    _exit(127);
  }
  ::signal(SIGINT, forward);
  ::signal(SIGTERM, forward);
  ::signal(SIGHUP, forward);

  // Reap orphans as they end, until CMD itself exits.
  int status = 0;
  for (;;) {
    int st = 0;
    const pid_t w = ::waitpid(-1, &st, 0);
    if (w == g_child) {
      status = st;
      break;
    }
    if (w < 0 && errno != EINTR) break;
  }
  const int rc =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

  // A process killed just before CMD ended may need a moment to go.
  std::set<pid_t> left;
  for (int i = 0; i < 40; ++i) {
    reap_all();
    left = descendants();
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (left.empty()) return rc;

  std::fprintf(stderr,
               "run_reaped: %zu process(es) left running by the tests "
               "(killed now):\n",
               left.size());
  for (pid_t pid : left) {
    std::fprintf(stderr, "  pid %d: %s\n", static_cast<int>(pid),
                 command_line(pid).c_str());
  }
  for (int i = 0; i < 100 && !left.empty(); ++i) {
    for (pid_t pid : left) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    reap_all();
    left = descendants();
  }
  // Reap the last of them too: a zombie handed on to init when we exit
  // would still answer `kill -0` for a moment.
  for (int i = 0; i < 100; ++i) {
    const pid_t w = ::waitpid(-1, nullptr, WNOHANG);
    if (w < 0 && errno == ECHILD) break;
    if (w == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return rc != 0 ? rc : 1;
}
