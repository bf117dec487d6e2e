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

// The token service's signing key and its self-signed certificate (the
// registry's rootcertbundle; distribution accepts an x5c chain that ends
// in it).
void make_token_cert(const std::string& d) {
  auto runner = make_posix_process_runner();
  run_or_throw(*runner,
               {"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                "-keyout", d + "/token.key", "-out", d + "/token.pem", "-days",
                "2", "-subj", "/CN=gpunode test token service"});
}

void wait_for(int port, const std::string& what, const Background& process) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!accepts(port)) {
    if (std::chrono::steady_clock::now() > until)
      throw std::runtime_error(what + " did not come up on port " +
                               std::to_string(port) + ": " +
                               process.err_so_far());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

bool registry_available() {
  return ::access("/usr/bin/docker-registry", X_OK) == 0 &&
         ::access("/usr/bin/skopeo", X_OK) == 0;
}

Registry::Registry(bool tls, RegistryAuth auth)
    : dir_(std::make_unique<TempDir>()), auth_(std::move(auth)) {
  const int port = free_port();
  host_ = "127.0.0.1:" + std::to_string(port);
  const std::string d = dir_->path();
  const std::string config = d + "/config.yml";
  std::string tls_config;
  if (tls) {
    make_certs(d);
    ca_file_ = d + "/ca.pem";
    tls_config = "  tls:\n    certificate: " + d +
                 "/server.pem\n    key: " + d + "/server.key\n";
  }
  std::string auth_config;
  if (auth_.kind == RegistryAuth::Kind::kHtpasswd) {
    auto runner = make_posix_process_runner();
    auto r = runner->run({"htpasswd", "-Bbn", auth_.user, auth_.password},
                         std::chrono::seconds(30));
    if (!r.succeeded())
      throw std::runtime_error("htpasswd failed: " + r.err + r.spawn_error);
    write_text(d + "/htpasswd", r.out, 0600);
    auth_config =
        "auth:\n  htpasswd:\n    realm: gpunode-test\n    path: " + d +
        "/htpasswd\n";
  } else if (auth_.kind == RegistryAuth::Kind::kToken) {
    make_token_cert(d);
    const int token_port = free_port();
    token_server_ = std::make_unique<Background>(std::vector<std::string>{
        "python3", std::string(GPUNODE_TEST_SIM) + "/token_server.py",
        std::to_string(token_port), d + "/token.key", d + "/token.pem",
        auth_.user, auth_.password, "gpunode-test-issuer", d + "/token.log"});
    wait_for(token_port, "token_server.py", *token_server_);
    auth_config = "auth:\n  token:\n    realm: http://127.0.0.1:" +
                  std::to_string(token_port) +
                  "/token\n    service: gpunode-test-registry\n"
                  "    issuer: gpunode-test-issuer\n    rootcertbundle: " +
                  d + "/token.pem\n";
  }
  write_text(config,
             "version: 0.1\n"
             "log:\n  level: warn\n"
             "storage:\n  filesystem:\n    rootdirectory: " +
                 d + "/storage\n" + "  delete:\n    enabled: true\n" +
                 auth_config + "http:\n  addr: " + host_ + "\n" + tls_config);
  process_ = std::make_unique<Background>(
      std::vector<std::string>{"/usr/bin/docker-registry", "serve", config});
  wait_for(port, "docker-registry", *process_);
}

std::string Registry::token_log() const {
  if (auth_.kind != RegistryAuth::Kind::kToken) return "";
  const std::string log = dir_->path() + "/token.log";
  return ::access(log.c_str(), F_OK) == 0 ? read_text(log) : std::string();
}

Registry::~Registry() {
  process_.reset();  // kills its process group before the storage goes
  token_server_.reset();
}

void Registry::push(const std::string& oci_archive,
                    const std::string& repo_tag) {
  auto runner = make_posix_process_runner();
  // --insecure-policy: no /etc/containers/policy.json needed on the test
  // machine; the registry is ours and on loopback. --preserve-digests: the
  // registry then holds the index, manifests and (uncompressed) layers with
  // build_image's digests, which the tests name.
  std::vector<std::string> argv = {"/usr/bin/skopeo",
                                   "--insecure-policy",
                                   "copy",
                                   "--all",
                                   "--preserve-digests",
                                   "--quiet",
                                   "--dest-tls-verify=false"};
  if (auth_.kind != RegistryAuth::Kind::kNone)
    argv.push_back("--dest-creds=" + auth_.user + ":" + auth_.password);
  argv.insert(argv.end(), {"oci-archive:" + oci_archive,
                           "docker://" + host_ + "/" + repo_tag});
  auto r = runner->run(argv, std::chrono::seconds(120));
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
