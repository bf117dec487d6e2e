#include "test_support.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "gpunode/digest.hpp"
#include "proc_table.hpp"

extern char** environ;

namespace gpunode::test {
namespace {

void remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    ::chmod(path.c_str(), 0700);
    if (DIR* d = ::opendir(path.c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") remove_tree(path + "/" + name);
      }
      ::closedir(d);
    }
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

void snapshot_into(const std::string& base, const std::string& rel,
                   std::map<std::string, std::string>& out) {
  const std::string full = base + rel;
  DIR* d = ::opendir(full.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  for (const auto& name : names) {
    const std::string r = rel + "/" + name;
    struct stat st {};
    if (::lstat((base + r).c_str(), &st) != 0) continue;
    std::ostringstream v;
    v << std::oct << (st.st_mode & 07777) << std::dec << ":";
    if (S_ISLNK(st.st_mode)) {
      char target[4096] = {};
      ssize_t n = ::readlink((base + r).c_str(), target, sizeof target - 1);
      v << "link:"
        << std::string(target, n > 0 ? static_cast<std::size_t>(n) : 0);
    } else if (S_ISDIR(st.st_mode)) {
      v << "dir";
      snapshot_into(base, r, out);
    } else if (S_ISREG(st.st_mode)) {
      v << st.st_size << ":" << sha256_hex(read_text(base + r));
    } else {
      v << "other";
    }
    out[r] = v.str();
  }
}

std::string sim_path() {
  const char* path = std::getenv("PATH");
  return std::string(GPUNODE_TEST_SIM) +
         "/bin:" + (path ? path : "/usr/bin:/bin");
}

}  // namespace

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp ? tmp : "/tmp") + "/gpunode-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() { remove_tree(path_); }

std::string base64(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(data.data()),
                      static_cast<int>(data.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string k3s_kubeconfig(const std::string& server, const std::string& ca_b64,
                           const std::string& cert_b64,
                           const std::string& key_b64,
                           const std::string& cluster_extra,
                           const std::string& user_extra) {
  return "apiVersion: v1\n"
         "clusters:\n"
         "- cluster:\n"
         "    certificate-authority-data: " +
         ca_b64 +
         "\n"
         "    server: " +
         server + "\n" + cluster_extra +
         "  name: default\n"
         "contexts:\n"
         "- context:\n"
         "    cluster: default\n"
         "    user: default\n"
         "  name: default\n"
         "current-context: default\n"
         "kind: Config\n"
         "preferences: {}\n"
         "users:\n"
         "- name: default\n"
         "  user:\n"
         "    client-certificate-data: " +
         cert_b64 +
         "\n"
         "    client-key-data: " +
         key_b64 + "\n" + user_extra;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& s) {
  for (const auto& line : lines) {
    if (line.find(s) != std::string::npos) return true;
  }
  return false;
}

std::map<std::string, std::string> snapshot_tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  snapshot_into(dir, "", out);
  return out;
}

std::map<std::string, std::string> snapshot_host_tree(const std::string& root) {
  auto snap = snapshot_tree(root);
  for (auto it = snap.begin(); it != snap.end();) {
    it = it->first.rfind("/var/lib/gpunode", 0) == 0 ? snap.erase(it)
                                                     : std::next(it);
  }
  return snap;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(static_cast<char>(c ^ 0x01));
}

void write_text(const std::string& path, const std::string& text,
                unsigned mode) {
  std::string dir = path.substr(0, path.rfind('/'));
  std::string partial;
  for (std::size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/')
      ::mkdir(dir.substr(0, i).c_str(), 0755);
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << text;
  }
  ::chmod(path.c_str(), mode);
}

std::string fixture(const std::string& relative) {
  return std::string(GPUNODE_TEST_FIXTURES) + "/" + relative;
}

namespace {

std::vector<std::string> child_environment(
    const std::vector<std::string>& env) {
  // The child gets this process's environment, the sim PATH, and the extra
  // entries; nothing goes through a shell.
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    if (entry.rfind("PATH=", 0) == 0) continue;
    bool overridden = false;
    for (const auto& x : env) {
      if (entry.rfind(x.substr(0, x.find('=') + 1), 0) == 0) overridden = true;
    }
    if (!overridden) envs.push_back(entry);
  }
  bool path_given = false;
  for (const auto& x : env) {
    if (x.rfind("PATH=", 0) == 0) path_given = true;
    envs.push_back(x);
  }
  if (!path_given) envs.push_back("PATH=" + sim_path());
  return envs;
}

// posix_spawnp would search the parent's PATH; resolve against the child's.
std::string resolve_program(const std::string& name,
                            const std::vector<std::string>& envs) {
  if (name.find('/') != std::string::npos) return name;
  std::string path;
  for (const auto& e : envs) {
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find(':', i);
    if (j == std::string::npos) j = path.size();
    std::string cand = path.substr(i, j - i) + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    i = j + 1;
  }
  return name;
}

}  // namespace

Background::Background(const std::vector<std::string>& argv,
                       const std::vector<std::string>& env)
    : io_(std::make_unique<TempDir>()) {
  std::vector<std::string> envs = child_environment(env);
  const std::string program = resolve_program(argv[0], envs);
  const std::string out_file = io_->path() + "/out",
                    err_file = io_->path() + "/err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args, envp;
  args.push_back(const_cast<char*>(program.c_str()));
  for (std::size_t i = 1; i < argv.size(); ++i)
    args.push_back(const_cast<char*>(argv[i].c_str()));
  args.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  int rc = ::posix_spawn(&pid_, program.c_str(), &actions, &attr, args.data(),
                         envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("cannot start " + program);
}

Background::~Background() {
  if (pid_ > 0) {
    kill_tree(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

void Background::kill_all(int sig) {
  if (pid_ > 0) kill_tree(pid_, sig);
}

std::string Background::err_so_far() const {
  return read_text(io_->path() + "/err");
}

Run Background::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid_, &status, WNOHANG);
    if (w == pid_) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      throw std::runtime_error("timed out waiting for a child process");
    }
    ::usleep(2000);
  }
  pid_ = -1;
  return Run{WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
             read_text(io_->path() + "/out"), read_text(io_->path() + "/err")};
}

Run run_with_sim(const std::vector<std::string>& argv,
                 const std::vector<std::string>& env,
                 std::chrono::milliseconds timeout) {
  Background child(argv, env);
  return child.wait(timeout);
}

void make_host_tree(const std::string& dir, const std::string& scenario) {
  Run r = run_with_sim(
      {"bash", std::string(GPUNODE_TEST_SIM) + "/host-tree.sh", dir, scenario});
  if (r.exit_code != 0) {
    throw std::runtime_error("host-tree.sh " + scenario + " failed: " + r.err);
  }
}

Run run_gpunode(const std::vector<std::string>& args,
                const std::vector<std::string>& env) {
  std::vector<std::string> argv{GPUNODE_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_with_sim(argv, env);
}

namespace {

bool g_skipped = false;

}  // namespace

void skip_test(const std::string& reason) {
  g_skipped = true;
  std::cout << "SKIPPED: " << reason << std::endl;
}

bool test_skipped() { return g_skipped; }

void reset_skipped() { g_skipped = false; }

bool process_running(pid_t pid) {
  ProcEntry e;
  return read_proc_entry(pid, e) && e.running();
}

void kill_tree(pid_t pid, int sig) {
  // Descendants first, found while their parents still live (a killed
  // parent's children are reparented and no longer traceable). A program
  // gpunode runs gets a process group of its own, so killing gpunode's group
  // alone would leave it running.
  const auto table = proc_table();
  const std::set<pid_t> tree = tree_of(pid, table);
  const pid_t own_group = ::getpgrp();
  std::set<pid_t> groups{pid};
  for (pid_t p : tree) {
    const auto it = table.find(p);
    if (it != table.end() && it->second.pgid != own_group)
      groups.insert(it->second.pgid);
  }
  for (pid_t g : groups) ::kill(-g, sig);
  for (pid_t p : tree) ::kill(p, sig);
}

int spawn_and_wait(char* const* argv, std::vector<std::string> env) {
  std::vector<char*> envp;
  for (auto& e : env) {
    envp.push_back(e.data());
    // posix_spawnp searches the parent's PATH: the simulated programs must
    // win there too.
    if (e.rfind("PATH=", 0) == 0) setenv("PATH", e.c_str() + 5, 1);
  }
  envp.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv, envp.data()) != 0) {
    std::fprintf(stderr, "cannot run %s\n", argv[0]);
    return 127;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void write_mirror_files(const std::string& root, bool agent) {
  write_text(root + "/etc/rancher/k3s/registries.yaml",
             "mirrors:\n  nvcr.io:\n");
  if (agent) {
    write_text(root +
                   "/var/lib/rancher/k3s/agent/etc/containerd/certs.d/"
                   "nvcr.io/hosts.toml",
               "# File generated by k3s. DO NOT EDIT.\n"
               "server = \"https://nvcr.io/v2\"\ncapabilities = [\"pull\", "
               "\"resolve\"]\n\n[host.\"https://127.0.0.1:6443/v2\"]\n"
               "  capabilities = [\"pull\", \"resolve\"]\n");
    return;
  }
  const std::string config = root + "/etc/rancher/k3s/config.yaml";
  std::ifstream in(config);
  std::stringstream was;
  was << in.rdbuf();
  write_text(config, was.str() + "embedded-registry: true\n");
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const std::size_t cut = t.rfind('\n');
  return cut == std::string::npos ? t : t.substr(cut + 1);
}

nlohmann::json last_stage_event(const std::string& out,
                                const std::string& stage) {
  std::istringstream lines(out);
  nlohmann::json found;
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_object() && e.value("stage", "") == stage && e.contains("facts"))
      found = std::move(e);
  }
  return found;
}

}  // namespace gpunode::test
