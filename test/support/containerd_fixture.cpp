#include "containerd_fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "gpunode/system_host.hpp"

extern char** environ;

namespace gpunode::test {
namespace {

constexpr auto kCtrTimeout = std::chrono::seconds(60);
constexpr auto kStartTimeout = std::chrono::seconds(10);
constexpr auto kStopTimeout = std::chrono::seconds(10);
constexpr std::size_t kMaxSocketPath = 100;  // sun_path is 108 bytes

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) out.push_back(line);
  }
  return out;
}

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string f;
  while (in >> f) out.push_back(f);
  return out;
}

std::string describe(const std::vector<std::string>& argv,
                     const ProcessResult& r) {
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  std::ostringstream s;
  s << "`" << cmd << "` failed (exit " << r.exit_code;
  if (r.timed_out) s << ", timed out";
  if (r.not_found) s << ", not found";
  if (!r.spawn_error.empty()) s << ", " << r.spawn_error;
  s << "): " << r.err << r.out;
  return s.str();
}

// Single-quoted for sh.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// Unmounts (lazily) anything left mounted under `dir`, deepest first, so
// the temp dir can be removed.
void unmount_under(const std::string& dir) {
  std::ifstream mounts("/proc/self/mounts");
  std::vector<std::string> targets;
  std::string line;
  while (std::getline(mounts, line)) {
    std::vector<std::string> f = fields_of(line);
    if (f.size() > 1 && f[1].rfind(dir + "/", 0) == 0) targets.push_back(f[1]);
  }
  for (auto it = targets.rbegin(); it != targets.rend(); ++it)
    ::umount2(it->c_str(), MNT_DETACH);
}

}  // namespace

bool containerd_available() {
  if (::geteuid() != 0) return false;
  auto runner = make_posix_process_runner();
  return runner->which("containerd").has_value() &&
         runner->which("ctr").has_value();
}

Containerd& Containerd::shared() {
  static Containerd instance;
  return instance;
}

std::unique_ptr<Containerd> Containerd::start_private() {
  return std::unique_ptr<Containerd>(new Containerd());
}

Containerd::Containerd() : runner_(make_posix_process_runner()) { start(); }

Containerd::~Containerd() { stop(); }

void Containerd::start() {
  const auto containerd = runner_->which("containerd");
  const auto ctr = runner_->which("ctr");
  if (!containerd || !ctr)
    throw std::runtime_error(
        "containerd fixture: containerd or ctr not on PATH");
  ctr_path_ = *ctr;
  dir_ = std::make_unique<TempDir>();
  const std::string& d = dir_->path();
  socket_ = d + "/containerd.sock";
  if (socket_.size() >= kMaxSocketPath) {
    std::string tmpl = "/tmp/gnc-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("containerd fixture: mkdtemp failed");
    socket_dir_ = tmpl;
    socket_ = socket_dir_ + "/c.sock";
  }
  log_ = d + "/containerd.log";
  bin_dir_ = d + "/bin";

  // Only the plugins' paths that default to host locations are moved; the
  // CRI plugin (which would want the host's CNI and /var/lib) is off.
  std::ostringstream config;
  config << "version = 2\n"
         << "root = \"" << d << "/root\"\n"
         << "state = \"" << d << "/state\"\n"
         << "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\n"
         << "[grpc]\n  address = \"" << socket_ << "\"\n\n"
         << "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"" << d
         << "/opt\"\n";
  const std::string config_path = d + "/config.toml";
  write_text(config_path, config.str());

  write_text(bin_dir_ + "/k3s",
             "#!/bin/sh\n"
             "# Test stand-in for k3s: only `k3s ctr ARGS...` is supported.\n"
             "# GPUNODE_TEST_K3S_CTR_SIGNAL=SIG: dies of that signal instead\n"
             "# (the bad-input corpus).\n"
             "if [ -n \"${GPUNODE_TEST_K3S_CTR_SIGNAL:-}\" ]; then\n"
             "  kill -s \"$GPUNODE_TEST_K3S_CTR_SIGNAL\" $$\n"
             "fi\n"
             "if [ \"$1\" = ctr ]; then\n"
             "  shift\n"
             "  CONTAINERD_NAMESPACE=\"${CONTAINERD_NAMESPACE:-k8s.io}\"\n"
             "  export CONTAINERD_NAMESPACE\n"
             "  exec " +
                 sh_quote(ctr_path_) + " --address " + sh_quote(socket_) +
                 " \"$@\"\n"
                 "fi\n"
                 "echo \"k3s (test wrapper): only 'k3s ctr' is supported, "
                 "not: $*\" >&2\n"
                 "exit 1\n",
             0755);

  // setpriv --pdeathsig makes the kernel kill containerd if this process
  // dies without running its destructors (a crash, a SIGKILL from ctest).
  std::vector<std::string> argv;
  if (auto setpriv = runner_->which("setpriv")) {
    ProcessResult help =
        runner_->run({*setpriv, "--help"}, std::chrono::seconds(10));
    if ((help.out + help.err).find("--pdeathsig") != std::string::npos)
      argv = {*setpriv, "--pdeathsig", "KILL"};
  }
  argv.insert(argv.end(), {*containerd, "--config", config_path});

  if (!service_.start(argv, log_, /*session=*/true)) {
    stop();
    throw std::runtime_error("containerd fixture: cannot start " + argv[0]);
  }

  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  for (;;) {
    if (service_.exited()) {
      const std::string tail = log_tail();
      stop();
      throw std::runtime_error("containerd fixture: containerd exited:\n" +
                               tail);
    }
    ProcessResult v = runner_->run({ctr_path_, "--address", socket_, "version"},
                                   std::chrono::seconds(5));
    if (v.succeeded()) return;
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string tail = log_tail();
      stop();
      throw std::runtime_error(
          "containerd fixture: containerd did not answer within 10 s:\n" +
          tail);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Containerd::stop() {
  service_.stop(kStopTimeout);
  if (dir_) {
    unmount_under(dir_->path());
    dir_.reset();
  }
  if (!socket_dir_.empty()) {
    ::unlink(socket_.c_str());
    ::rmdir(socket_dir_.c_str());
    socket_dir_.clear();
  }
}

std::string Containerd::log_tail() const { return file_tail(log_); }

ProcessResult Containerd::ctr(const std::vector<std::string>& args) {
  std::vector<std::string> argv{ctr_path_, "--address", socket_, "-n",
                                "k8s.io"};
  argv.insert(argv.end(), args.begin(), args.end());
  return runner_->run(argv, kCtrTimeout);
}

std::vector<std::string> Containerd::image_names() {
  ProcessResult r = ctr({"images", "ls", "-q"});
  if (!r.succeeded()) throw std::runtime_error(describe({"images ls"}, r));
  return lines_of(r.out);
}

std::map<std::string, std::string> Containerd::content_digests() {
  ProcessResult r = ctr({"content", "ls"});
  if (!r.succeeded()) throw std::runtime_error(describe({"content ls"}, r));
  std::map<std::string, std::string> out;
  for (const auto& line : lines_of(r.out)) {
    std::vector<std::string> f = fields_of(line);
    if (f.size() < 2 || f[0] == "DIGEST") continue;
    out[f[0]] = f[1];
  }
  return out;
}

void Containerd::reset() {
  std::vector<std::string> images = image_names();
  if (!images.empty()) {
    std::vector<std::string> args{"images", "rm", "--sync"};
    args.insert(args.end(), images.begin(), images.end());
    ProcessResult r = ctr(args);
    if (!r.succeeded()) throw std::runtime_error(describe(args, r));
  }
  // Leases left by an interrupted ctr would keep content alive.
  ProcessResult leases = ctr({"leases", "ls", "-q"});
  if (!leases.succeeded())
    throw std::runtime_error(describe({"leases ls"}, leases));
  for (const auto& id : lines_of(leases.out)) ctr({"leases", "rm", id});
  std::map<std::string, std::string> content = content_digests();
  if (!content.empty()) {
    std::vector<std::string> args{"content", "rm"};
    for (const auto& [digest, size] : content) args.push_back(digest);
    ctr(args);  // blobs the image removal already collected are "not found"
  }
  images = image_names();
  content = content_digests();
  if (!images.empty() || !content.empty()) {
    throw std::runtime_error("containerd fixture: reset left " +
                             std::to_string(images.size()) + " images and " +
                             std::to_string(content.size()) + " blobs");
  }
}

}  // namespace gpunode::test
