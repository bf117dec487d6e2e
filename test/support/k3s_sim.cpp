#include "k3s_sim.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpunode/openssl_handles.hpp"
#include "service_process.hpp"

extern char** environ;

namespace gpunode::test {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(10);
constexpr auto kStopTimeout = std::chrono::seconds(3);
constexpr long kDay = 24 * 3600;
// Debian's interpreter, never a pyenv shim: the simulator needs
// python3-yaml, which only the system Python has.
constexpr const char* kPython = "/usr/bin/python3";

[[noreturn]] void ssl_fail(const std::string& what) {
  char buf[256] = {};
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  throw std::runtime_error("k3s sim fixture: " + what + ": " + buf);
}

EvpPkeyPtr make_key() {
  // EC P-256, as k3s generates its CAs and client certificates.
  EvpPkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) ssl_fail("EC key generation");
  return key;
}

struct CertSpec {
  std::string common_name;
  std::string organization;
  bool ca = false;
  bool server = false;
  bool client = false;
  std::string subject_alt_names;  // "IP:127.0.0.1,DNS:localhost"
  long not_before = -3600;        // seconds from now
  long not_after = 365 * kDay;
};

CertSpec ca_spec(const std::string& common_name) {
  CertSpec spec;
  spec.common_name = common_name;
  spec.ca = true;
  return spec;
}

void add_extension(X509* cert, X509V3_CTX* ctx, int nid,
                   const std::string& value) {
  X509_EXTENSION* ext =
      X509V3_EXT_conf_nid(nullptr, ctx, nid, const_cast<char*>(value.c_str()));
  if (ext == nullptr) ssl_fail("extension " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// Signs with issuer_key (self-signed when issuer is null).
X509Ptr make_cert(const CertSpec& spec, EVP_PKEY* key, X509* issuer,
                  EVP_PKEY* issuer_key) {
  X509Ptr cert(X509_new());
  if (!cert) ssl_fail("X509_new");
  X509_set_version(cert.get(), 2);
  unsigned char serial_bytes[16];
  RAND_bytes(serial_bytes, sizeof serial_bytes);
  serial_bytes[0] &= 0x7f;  // positive
  BIGNUM* serial = BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr);
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), spec.not_before);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), spec.not_after);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  auto add_name = [&](const char* field, const std::string& value) {
    X509_NAME_add_entry_by_txt(
        name, field, MBSTRING_ASC,
        reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1, 0);
  };
  if (!spec.organization.empty()) add_name("O", spec.organization);
  add_name("CN", spec.common_name);
  X509_set_issuer_name(cert.get(),
                       issuer ? X509_get_subject_name(issuer) : name);

  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer ? issuer : cert.get(), cert.get(), nullptr,
                 nullptr, 0);
  if (spec.ca) {
    add_extension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(cert.get(), &ctx, NID_key_usage,
                  "critical,digitalSignature,keyCertSign,cRLSign");
    add_extension(cert.get(), &ctx, NID_subject_key_identifier, "hash");
  } else {
    add_extension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), &ctx, NID_key_usage,
                  "critical,digitalSignature,keyEncipherment");
    std::string usage = spec.server ? "serverAuth" : "";
    if (spec.client)
      usage += std::string(usage.empty() ? "" : ",") + "clientAuth";
    add_extension(cert.get(), &ctx, NID_ext_key_usage, usage);
    add_extension(cert.get(), &ctx, NID_authority_key_identifier, "keyid");
    if (!spec.subject_alt_names.empty())
      add_extension(cert.get(), &ctx, NID_subject_alt_name,
                    spec.subject_alt_names);
  }
  if (X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) == 0)
    ssl_fail("X509_sign");
  return cert;
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string cert_pem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  return bio_text(bio.get());
}

// "EC PRIVATE KEY" (SEC 1), the form k3s writes into client-key-data.
std::string key_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey_traditional(bio.get(), key, nullptr, nullptr, 0,
                                           nullptr, nullptr) != 1)
    ssl_fail("writing a key");
  return bio_text(bio.get());
}

// k3s's /etc/rancher/k3s/k3s.yaml, byte for byte in shape.
std::string kubeconfig_text(int port, const std::string& ca,
                            const std::string& cert, const std::string& key) {
  return k3s_kubeconfig("https://127.0.0.1:" + std::to_string(port), base64(ca),
                        base64(cert), base64(key));
}

std::string tail_of(const std::string& path) { return file_tail(path, 8000); }

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// ------------------------------------------------------------ plain sockets

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("k3s sim fixture: socket() failed");
  timeval tv{30, 0};  // a stuck simulator must not hang the test forever
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error("k3s sim fixture: cannot connect to 127.0.0.1:" +
                             std::to_string(port));
  }
  return fd;
}

std::string http_request_text(const std::string& method,
                              const std::string& path, int port,
                              const std::string& body,
                              const std::string& content_type) {
  std::string request = method + " " + path +
                        " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                        "\r\nUser-Agent: gpunode-test\r\nAccept: "
                        "application/json\r\nConnection: close\r\n";
  if (!body.empty() || method != "GET") {
    request += "Content-Type: " + content_type +
               "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return request + "\r\n" + body;
}

std::string dechunk(const std::string& body) {
  std::string out;
  std::size_t pos = 0;
  while (pos < body.size()) {
    const std::size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const std::size_t size =
        std::stoul(body.substr(pos, eol - pos), nullptr, 16);
    if (size == 0) break;
    out += body.substr(eol + 2, size);
    pos = eol + 2 + size + 2;
  }
  return out;
}

ApiResponse parse_response(const std::string& raw) {
  ApiResponse r;
  const std::size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || end == std::string::npos)
    throw std::runtime_error("k3s sim fixture: not an HTTP answer: " +
                             raw.substr(0, 200));
  r.status = std::stoi(raw.substr(9, 3));
  const std::string head = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  bool chunked = false;
  std::size_t line = head.find("\r\n");
  while (line != std::string::npos) {
    const std::size_t next = head.find("\r\n", line + 2);
    std::string header =
        head.substr(line + 2, next == std::string::npos ? std::string::npos
                                                        : next - line - 2);
    std::string lower = header;
    for (char& c : lower) c = static_cast<char>(std::tolower(c));
    if (lower.rfind("content-type:", 0) == 0)
      r.content_type = header.substr(header.find(':') + 2);
    if (lower.rfind("transfer-encoding:", 0) == 0 &&
        lower.find("chunked") != std::string::npos)
      chunked = true;
    line = next;
  }
  if (chunked) r.body = dechunk(r.body);
  return r;
}

// -------------------------------------------------------------------- Impl

// k3s's agent data dir (pkg/agent/config/config.go: <data-dir>/agent).
constexpr const char* kAgentDir = "/var/lib/rancher/k3s/agent";

// k3s pkg/daemons/control/deps/deps.go kubeconfigTemplate, as KubeConfig
// writes it for the kubelet: file paths, not embedded data.
std::string kubelet_kubeconfig_text(const std::string& url,
                                    const std::string& dir) {
  return "apiVersion: v1\nclusters:\n- cluster:\n    server: " + url +
         "\n    certificate-authority: " + dir +
         "/server-ca.crt\n  name: local\ncontexts:\n- context:\n"
         "    cluster: local\n    namespace: default\n    user: user\n"
         "  name: Default\ncurrent-context: Default\nkind: Config\n"
         "preferences: {}\nusers:\n- name: user\n  user:\n"
         "    client-certificate: " +
         dir + "/client-kubelet.crt\n    client-key: " + dir +
         "/client-kubelet.key\n";
}

struct KubeletCredentials {
  EvpPkeyPtr key;
  X509Ptr cert;
  std::string kubectl_kubeconfig;
};

}  // namespace

struct K3sSim::Impl {
  SimOptions options;
  std::unique_ptr<TempDir> dir;
  std::string kubeconfig, wrong_ca_kubeconfig, expired_kubeconfig, log;
  int port = 0;
  int control_port = 0;
  ServiceProcess service;
  EvpPkeyPtr server_ca_key, client_ca_key, admin_key;
  X509Ptr server_ca, client_ca, admin_cert, expired_cert;
  std::map<std::string, KubeletCredentials> kubelets;

  void make_certificates();
  std::string write_nodes_json() const;
  ApiResponse request(X509* leaf, EVP_PKEY* key, const std::string& method,
                      const std::string& path, const std::string& body,
                      const std::string& content_type);
  void start();
  void stop();
  std::string control(const std::string& method, const std::string& path,
                      const std::string& body = "");
};

void K3sSim::Impl::make_certificates() {
  const std::string& d = dir->path();
  const long stamp = static_cast<long>(::time(nullptr));
  server_ca_key = make_key();
  server_ca = make_cert(ca_spec("k3s-server-ca@" + std::to_string(stamp)),
                        server_ca_key.get(), nullptr, nullptr);
  EvpPkeyPtr server_key = make_key();
  CertSpec server;
  server.common_name = "kube-apiserver";
  server.server = true;
  server.subject_alt_names =
      "DNS:kubernetes,DNS:kubernetes.default,DNS:localhost,IP:127.0.0.1,"
      "IP:::1";
  X509Ptr server_cert =
      make_cert(server, server_key.get(), server_ca.get(), server_ca_key.get());

  client_ca_key = make_key();
  client_ca = make_cert(ca_spec("k3s-client-ca@" + std::to_string(stamp)),
                        client_ca_key.get(), nullptr, nullptr);
  admin_key = make_key();
  CertSpec admin;
  admin.common_name = "system:admin";
  admin.organization = "system:masters";
  admin.client = true;
  admin_cert =
      make_cert(admin, admin_key.get(), client_ca.get(), client_ca_key.get());
  // Same CA, same subject, but valid only until yesterday.
  CertSpec expired = admin;
  expired.not_before = -30 * kDay;
  expired.not_after = -kDay;
  expired_cert =
      make_cert(expired, admin_key.get(), client_ca.get(), client_ca_key.get());
  // An unrelated CA: a kubeconfig trusting it must not reach the server.
  EvpPkeyPtr wrong_key = make_key();
  X509Ptr wrong_ca =
      make_cert(ca_spec("k3s-server-ca@" + std::to_string(stamp - 1)),
                wrong_key.get(), nullptr, nullptr);

  write_text(d + "/ca.pem", cert_pem(server_ca.get()), 0644);
  write_text(d + "/ca-key.pem", key_pem(server_ca_key.get()), 0600);
  // The serving chain carries its CA, as k3s's serving-kube-apiserver.crt.
  write_text(d + "/server.pem",
             cert_pem(server_cert.get()) + cert_pem(server_ca.get()), 0644);
  write_text(d + "/server-key.pem", key_pem(server_key.get()), 0600);
  write_text(d + "/client-ca.pem", cert_pem(client_ca.get()), 0644);
  write_text(d + "/client-ca-key.pem", key_pem(client_ca_key.get()), 0600);
  write_text(d + "/client-admin.pem",
             cert_pem(admin_cert.get()) + cert_pem(client_ca.get()), 0644);
  write_text(d + "/client-admin-key.pem", key_pem(admin_key.get()), 0600);
  write_text(d + "/client-expired.pem", cert_pem(expired_cert.get()), 0644);
  write_text(d + "/wrong-ca.pem", cert_pem(wrong_ca.get()), 0644);
}

std::string K3sSim::Impl::write_nodes_json() const {
  nlohmann::json nodes = nlohmann::json::array();
  for (const SimNodeConfig& n : options.nodes) {
    nodes.push_back({{"name", n.name},
                     {"root", n.root},
                     {"containerd_socket", n.containerd_socket},
                     {"gpus", n.gpus},
                     {"server", n.server},
                     {"plugin_start_ms", n.plugin_start_ms},
                     {"embedded_registry_mirror", n.embedded_registry_mirror}});
  }
  const std::string path = dir->path() + "/nodes.json";
  write_text(path, nodes.dump(2) + "\n", 0644);
  return path;
}

void K3sSim::Impl::start() {
  const std::string& d = dir->path();
  log = d + "/sim.log";
  std::vector<std::string> argv{kPython,
                                "-B",  // no __pycache__ in the source tree
                                std::string(GPUNODE_TEST_SIM) + "/k3s_sim.py",
                                "--dir",
                                d,
                                "--gpus",
                                std::to_string(options.gpus),
                                "--node",
                                options.node,
                                "--plugin-start-ms",
                                std::to_string(options.plugin_start_ms),
                                "--parent-pid",
                                std::to_string(::getpid())};
  if (options.nodes.empty()) {
    argv.push_back("--root");
    argv.push_back(options.root);
  } else {
    argv.push_back("--nodes-json");
    argv.push_back(write_nodes_json());
  }
  if (!options.containerd_socket.empty()) {
    argv.push_back("--containerd-socket");
    argv.push_back(options.containerd_socket);
  }
  if (options.k3s_runtime_classes) argv.push_back("--k3s-runtime-classes");

  // Its own process group: stop() ends it and its `ctr` children.
  if (!service.start(argv, log)) {
    throw std::runtime_error(std::string("k3s sim fixture: cannot start ") +
                             kPython);
  }

  const std::string ready = d + "/ready.json";
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  for (;;) {
    if (service.exited()) {
      throw std::runtime_error("k3s sim fixture: the simulator exited:\n" +
                               tail_of(log));
    }
    if (file_exists(ready)) {
      const auto info = nlohmann::json::parse(read_text(ready));
      port = info.at("port").get<int>();
      control_port = info.at("control_port").get<int>();
      return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string tail = tail_of(log);
      stop();
      throw std::runtime_error(
          "k3s sim fixture: the simulator did not start within 10 s:\n" + tail);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void K3sSim::Impl::stop() { service.stop(kStopTimeout); }

std::string K3sSim::Impl::control(const std::string& method,
                                  const std::string& path,
                                  const std::string& body) {
  const int fd = connect_loopback(control_port);
  const std::string request =
      http_request_text(method, path, control_port, body, "application/json");
  std::string raw;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buf[65536];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0)
      raw.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  ApiResponse r = parse_response(raw);
  if (r.status / 100 != 2)
    throw std::runtime_error("k3s sim control " + method + " " + path +
                             ": HTTP " + std::to_string(r.status) + " " +
                             r.body);
  return r.body;
}

// ----------------------------------------------------------------- K3sSim

K3sSim::K3sSim(SimOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.root.empty() && options.nodes.empty())
    throw std::invalid_argument("K3sSim: SimOptions.root or nodes is required");
  impl_->options = std::move(options);
  impl_->dir = std::make_unique<TempDir>();
  impl_->make_certificates();
  impl_->start();
  const std::string& d = impl_->dir->path();
  const std::string ca = cert_pem(impl_->server_ca.get());
  const std::string client = read_text(d + "/client-admin.pem");
  const std::string key = key_pem(impl_->admin_key.get());
  const std::string text = kubeconfig_text(impl_->port, ca, client, key);
  impl_->kubeconfig = d + "/k3s.yaml";
  write_text(impl_->kubeconfig, text, 0600);
  // Only servers have the admin kubeconfig (k3s writes it on servers).
  if (impl_->options.nodes.empty())
    write_text(impl_->options.root + "/etc/rancher/k3s/k3s.yaml", text, 0600);
  for (const SimNodeConfig& n : impl_->options.nodes)
    if (n.server) write_text(n.root + "/etc/rancher/k3s/k3s.yaml", text, 0600);
  impl_->wrong_ca_kubeconfig = d + "/k3s-wrong-ca.yaml";
  write_text(
      impl_->wrong_ca_kubeconfig,
      kubeconfig_text(impl_->port, read_text(d + "/wrong-ca.pem"), client, key),
      0600);
  impl_->expired_kubeconfig = d + "/k3s-expired.yaml";
  write_text(impl_->expired_kubeconfig,
             kubeconfig_text(impl_->port, ca,
                             read_text(d + "/client-expired.pem"), key),
             0600);
}

K3sSim::~K3sSim() { impl_->stop(); }

const std::string& K3sSim::kubeconfig() const { return impl_->kubeconfig; }
int K3sSim::port() const { return impl_->port; }
int K3sSim::control_port() const { return impl_->control_port; }
const std::string& K3sSim::dir() const { return impl_->dir->path(); }
pid_t K3sSim::pid() const { return impl_->service.pid(); }

std::string K3sSim::log_tail() const { return tail_of(impl_->log); }

nlohmann::json K3sSim::stats() {
  return nlohmann::json::parse(impl_->control("GET", "/stats"));
}

void K3sSim::reset_stats() { impl_->control("POST", "/stats/reset", "{}"); }

void K3sSim::faults(const nlohmann::json& knobs) {
  impl_->control("POST", "/faults", knobs.dump());
}

void K3sSim::set_node(const nlohmann::json& node_knobs) {
  impl_->control("POST", "/node", node_knobs.dump());
}

nlohmann::json K3sSim::object(const std::string& api_path) {
  std::string escaped;
  for (unsigned char c : api_path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '.' || c == '_') {
      escaped += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      escaped += hex;
    }
  }
  return nlohmann::json::parse(
      impl_->control("GET", "/object?path=" + escaped));
}

std::string K3sSim::pod_log(const std::string& ns, const std::string& pod) {
  try {
    return impl_->control("GET", "/log?namespace=" + ns + "&pod=" + pod);
  } catch (const std::runtime_error&) {
    return "";
  }
}

ApiResponse K3sSim::api(const std::string& method, const std::string& path,
                        const std::string& body,
                        const std::string& content_type, ClientCert cert) {
  X509* leaf = nullptr;
  if (cert != ClientCert::kNone)
    leaf = cert == ClientCert::kAdmin ? impl_->admin_cert.get()
                                      : impl_->expired_cert.get();
  return impl_->request(leaf, impl_->admin_key.get(), method, path, body,
                        content_type);
}

ApiResponse K3sSim::api_as(const std::string& node, const std::string& method,
                           const std::string& path, const std::string& body,
                           const std::string& content_type) {
  const auto it = impl_->kubelets.find(node);
  if (it == impl_->kubelets.end())
    throw std::invalid_argument("K3sSim::api_as: no credentials for " + node);
  return impl_->request(it->second.cert.get(), it->second.key.get(), method,
                        path, body, content_type);
}

ApiResponse K3sSim::Impl::request(X509* leaf, EVP_PKEY* key,
                                  const std::string& method,
                                  const std::string& path,
                                  const std::string& body,
                                  const std::string& content_type) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) ssl_fail("SSL_CTX_new");
  X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), server_ca.get());
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (leaf != nullptr) {
    if (SSL_CTX_use_certificate(ctx.get(), leaf) != 1 ||
        SSL_CTX_use_PrivateKey(ctx.get(), key) != 1)
      ssl_fail("client certificate");
  }
  const int fd = connect_loopback(port);
  SslPtr ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), "127.0.0.1");
  if (SSL_connect(ssl.get()) != 1) {
    ::close(fd);
    ssl_fail("TLS handshake with the simulated API");
  }
  const std::string request =
      http_request_text(method, path, port, body, content_type);
  SSL_write(ssl.get(), request.data(), static_cast<int>(request.size()));
  std::string raw;
  char buf[65536];
  int n;
  while ((n = SSL_read(ssl.get(), buf, sizeof buf)) > 0)
    raw.append(buf, static_cast<std::size_t>(n));
  SSL_shutdown(ssl.get());
  ::close(fd);
  return parse_response(raw);
}

std::string K3sSim::write_kubelet_credentials(const std::string& node,
                                              const std::string& root) {
  KubeletCredentials creds;
  creds.key = make_key();
  CertSpec spec;
  spec.common_name = "system:node:" + node;
  spec.organization = "system:nodes";
  spec.client = true;
  creds.cert = make_cert(spec, creds.key.get(), impl_->client_ca.get(),
                         impl_->client_ca_key.get());
  const std::string dir = root + kAgentDir;
  write_text(dir + "/server-ca.crt", cert_pem(impl_->server_ca.get()), 0644);
  write_text(dir + "/client-kubelet.crt",
             cert_pem(creds.cert.get()) + cert_pem(impl_->client_ca.get()),
             0644);
  write_text(dir + "/client-kubelet.key", key_pem(creds.key.get()), 0600);
  // In real k3s `server:` is the agent's client load balancer,
  // https://127.0.0.1:6444 (pkg/agent/config); here it is the simulator.
  const std::string url = "https://127.0.0.1:" + std::to_string(impl_->port);
  const std::string kubeconfig = dir + "/kubelet.kubeconfig";
  write_text(kubeconfig, kubelet_kubeconfig_text(url, kAgentDir), 0600);
  creds.kubectl_kubeconfig = impl_->dir->path() + "/kubelet-" + node + ".yaml";
  write_text(creds.kubectl_kubeconfig, kubelet_kubeconfig_text(url, dir), 0600);
  impl_->kubelets[node] = std::move(creds);
  return kubeconfig;
}

std::string K3sSim::kubelet_kubeconfig_for_kubectl(
    const std::string& node) const {
  const auto it = impl_->kubelets.find(node);
  if (it == impl_->kubelets.end())
    throw std::invalid_argument("K3sSim: no credentials for " + node);
  return it->second.kubectl_kubeconfig;
}

std::string K3sSim::kubeconfig_with_wrong_ca() const {
  return impl_->wrong_ca_kubeconfig;
}

std::string K3sSim::kubeconfig_with_expired_cert() const {
  return impl_->expired_kubeconfig;
}

}  // namespace gpunode::test
