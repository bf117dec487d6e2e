#include "registry_fixture.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "gpunode/system_host.hpp"

namespace gpunode::test {
namespace {

// A port the kernel just handed out; closed again for the registry to bind
// (a small race, acceptable on loopback in tests).
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) throw std::runtime_error("socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(s);
    throw std::runtime_error("cannot find a free port");
  }
  ::close(s);
  return ntohs(a.sin_port);
}

bool accepts(int port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

void run_or_throw(ProcessRunner& runner, const std::vector<std::string>& argv) {
  auto r = runner.run(argv, std::chrono::seconds(30));
  if (!r.succeeded())
    throw std::runtime_error(argv[0] + " " + argv[1] + " failed: " + r.err +
                             r.spawn_error);
}

// A throwaway CA and a server certificate for IP 127.0.0.1 (what the
// client connects to, so that is what must be in subjectAltName).
void make_certs(const std::string& d) {
  auto runner = make_posix_process_runner();
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt",
                                       "ec_paramgen_curve:P-256", "-nodes"};
  std::vector<std::string> ca = {"openssl", "req", "-x509"};
  ca.insert(ca.end(), ec.begin(), ec.end());
  ca.insert(ca.end(), {"-keyout", d + "/ca.key", "-out", d + "/ca.pem", "-days",
                       "2", "-subj", "/CN=gpunode test registry CA"});
  run_or_throw(*runner, ca);
  std::vector<std::string> csr = {"openssl", "req"};
  csr.insert(csr.end(), ec.begin(), ec.end());
  csr.insert(csr.end(), {"-keyout", d + "/server.key", "-out",
                         d + "/server.csr", "-subj", "/CN=127.0.0.1"});
  run_or_throw(*runner, csr);
  write_text(d + "/ext.cnf", "subjectAltName=IP:127.0.0.1\n");
  run_or_throw(*runner, {"openssl", "x509", "-req", "-in", d + "/server.csr",
                         "-CA", d + "/ca.pem", "-CAkey", d + "/ca.key",
                         "-CAcreateserial", "-out", d + "/server.pem", "-days",
                         "2", "-extfile", d + "/ext.cnf"});
}

}  // namespace

bool registry_available() {
  return ::access("/usr/bin/docker-registry", X_OK) == 0 &&
         ::access("/usr/bin/skopeo", X_OK) == 0;
}

Registry::Registry(bool tls) : dir_(std::make_unique<TempDir>()) {
  const int port = free_port();
  host_ = "127.0.0.1:" + std::to_string(port);
  const std::string config = dir_->path() + "/config.yml";
  std::string tls_config;
  if (tls) {
    make_certs(dir_->path());
    ca_file_ = dir_->path() + "/ca.pem";
    tls_config = "  tls:\n    certificate: " + dir_->path() +
                 "/server.pem\n    key: " + dir_->path() + "/server.key\n";
  }
  write_text(config,
             "version: 0.1\n"
             "log:\n  level: warn\n"
             "storage:\n  filesystem:\n    rootdirectory: " +
                 dir_->path() + "/storage\n" +
                 "  delete:\n    enabled: true\n"
                 "http:\n  addr: " +
                 host_ + "\n" + tls_config);
  process_ = std::make_unique<Background>(
      std::vector<std::string>{"/usr/bin/docker-registry", "serve", config});
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!accepts(port)) {
    if (std::chrono::steady_clock::now() > until)
      throw std::runtime_error("docker-registry did not come up on " + host_ +
                               ": " + process_->err_so_far());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Registry::~Registry() {
  process_.reset();  // kills its process group before the storage goes
}

void Registry::push(const std::string& oci_archive,
                    const std::string& repo_tag) {
  auto runner = make_posix_process_runner();
  // --insecure-policy: no /etc/containers/policy.json needed on the test
  // machine; the registry is ours and on loopback. --preserve-digests: the
  // registry then holds the index, manifests and (uncompressed) layers with
  // build_image's digests, which the tests name.
  auto r = runner->run(
      {"/usr/bin/skopeo", "--insecure-policy", "copy", "--all",
       "--preserve-digests", "--quiet", "--dest-tls-verify=false",
       "oci-archive:" + oci_archive, "docker://" + host_ + "/" + repo_tag},
      std::chrono::seconds(120));
  if (!r.succeeded())
    throw std::runtime_error("skopeo copy to " + host_ + "/" + repo_tag +
                             " failed: " + r.err + r.spawn_error);
}

std::string Registry::blob_path(const std::string& digest) const {
  const std::string hex = digest.substr(digest.find(':') + 1);
  return dir_->path() + "/storage/docker/registry/v2/blobs/sha256/" +
         hex.substr(0, 2) + "/" + hex + "/data";
}

}  // namespace gpunode::test
