#include "service_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <thread>

#include "test_support.hpp"

extern char** environ;

namespace gpunode::test {

bool ServiceProcess::start(const std::vector<std::string>& argv,
                           const std::string& log, bool session) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
#ifdef POSIX_SPAWN_SETSID
  if (session) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  } else
#endif
  {
    (void)session;
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, copy[0].c_str(), &actions, &attr,
                               args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) pid_ = -1;
  return rc == 0;
}

bool ServiceProcess::exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
  pid_ = -1;
  return true;
}

void ServiceProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return;
  // Its group (its own pid, as a group or session leader): the service and
  // what it started (the simulator's `ctr` children).
  ::kill(-pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
}

std::string file_tail(const std::string& path, std::size_t bytes) {
  std::string text;
  try {
    text = read_text(path);
  } catch (const std::exception&) {
    return "(no log)";
  }
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

}  // namespace gpunode::test
