// The libcurl transport and Client::connect. TLS is always verified, and
// only against the kubeconfig's CA; the client certificate and key go to
// libcurl as in-memory blobs (CURLOPT_*_BLOB, libcurl >= 7.77 with
// OpenSSL), so key material is never written to a file.
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include <cctype>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpunode/curl_handles.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/openssl_handles.hpp"
#include "kube/http.hpp"

namespace gpunode::kube {
namespace detail {
namespace {

// An error body larger than this is not a Status; collecting it whole would
// only cost memory. Normal bodies (a LIST of pods) stay far below it.
constexpr std::size_t kMaxBodyBytes = 64u << 20;

// The most recent OpenSSL error as text; clears the queue so it does not
// leak into libcurl's own error reporting later.
std::string openssl_error() {
  const unsigned long code = ERR_peek_last_error();
  std::string text;
  if (code != 0) {
    char buf[256];
    ERR_error_string_n(code, buf, sizeof buf);
    text = buf;
  }
  ERR_clear_error();
  return text.empty() ? "unknown OpenSSL error" : text;
}

std::string asn1_date(const ASN1_TIME* t) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return "an unreadable date";
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string utc_date(std::chrono::system_clock::time_point t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

bool contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// Go's proxy rules (which kubectl follows) never proxy loopback; libcurl
// would, if https_proxy is set. Keep the operator's no_proxy and add it.
std::string no_proxy_list() {
  std::string list = "localhost,127.0.0.1,::1";
  for (const char* name : {"no_proxy", "NO_PROXY"}) {
    if (const char* v = std::getenv(name); v && *v) {
      list = std::string(v) + "," + list;
      break;
    }
  }
  return list;
}

// State of one transfer, shared with libcurl's callbacks.
struct Transfer {
  CURL* handle = nullptr;
  const OnData* on_data = nullptr;
  HttpResponse response;
  bool too_big = false;
  std::exception_ptr thrown;  // from on_data; rethrown outside libcurl
};

// libcurl calls this with body data. Exceptions must not cross libcurl's C
// frames, so one from on_data is kept and rethrown after the transfer.
size_t on_write(char* ptr, size_t size, size_t count, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t n = size * count;
  if (t->on_data && *t->on_data) {
    long code = 0;
    curl_easy_getinfo(t->handle, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && code < 300) {
      try {
        if (!(*t->on_data)(std::string_view(ptr, n))) {
          t->response.stopped = true;
          return 0;  // CURLE_WRITE_ERROR, which perform() treats as done
        }
      } catch (...) {
        t->thrown = std::current_exception();
        return 0;
      }
      return n;
    }
  }
  if (t->response.body.size() + n > kMaxBodyBytes) {
    t->too_big = true;
    return 0;
  }
  t->response.body.append(ptr, n);
  return n;
}

size_t on_header(char* ptr, size_t size, size_t count, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t n = size * count;
  std::string line(ptr, n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response.retry_after.reset();  // a new response (e.g. after 100)
    return n;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos) return n;
  std::string name = line.substr(0, colon);
  for (char& c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name == "retry-after") {
    t->response.retry_after =
        parse_retry_after(std::string_view(line).substr(colon + 1));
  }
  return n;
}

int on_progress(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return stop_requested() ? 1 : 0;
}

class CurlTransport : public Transport {
 public:
  explicit CurlTransport(const Kubeconfig& config)
      : config_(config), no_proxy_(no_proxy_list()) {}

  ~CurlTransport() override {
    idle_.clear();  // handles first: they point at the blobs below
    OPENSSL_cleanse(config_.client_key_pem.data(),
                    config_.client_key_pem.size());
    OPENSSL_cleanse(config_.token.data(), config_.token.size());
  }

  Outcome perform(const HttpRequest& request, std::chrono::milliseconds timeout,
                  std::chrono::milliseconds connect_timeout,
                  const OnData& on_data) override {
    CurlPtr handle = take_handle();
    if (!handle)
      return TransportError{Failure::kOther, "curl_easy_init failed"};
    Transfer transfer;
    transfer.handle = handle.get();
    transfer.on_data = &on_data;
    char errbuf[CURL_ERROR_SIZE] = {0};
    CurlSlistPtr headers;
    if (auto problem = configure(handle.get(), request, timeout,
                                 connect_timeout, transfer, errbuf, headers)) {
      return *problem;
    }
    const CURLcode rc = curl_easy_perform(handle.get());
    long status = 0;
    curl_easy_getinfo(handle.get(), CURLINFO_RESPONSE_CODE, &status);
    curl_off_t connect_us = 0;
    curl_easy_getinfo(handle.get(), CURLINFO_APPCONNECT_TIME_T, &connect_us);
    // The idle handle must not point at this stack frame's buffer.
    curl_easy_setopt(handle.get(), CURLOPT_ERRORBUFFER,
                     static_cast<char*>(nullptr));
    give_back(std::move(handle));
    if (transfer.thrown) std::rethrow_exception(transfer.thrown);

    if (rc == CURLE_OK ||
        (rc == CURLE_WRITE_ERROR && transfer.response.stopped)) {
      transfer.response.status = static_cast<int>(status);
      return std::move(transfer.response);
    }
    std::string detail = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (transfer.too_big) {
      return TransportError{Failure::kOther,
                            "the response is larger than " +
                                std::to_string(kMaxBodyBytes >> 20) + " MiB"};
    }
    return TransportError{classify(rc, detail, connect_us > 0), detail};
  }

 private:
  static Failure classify(CURLcode rc, const std::string& detail,
                          bool tls_connected) {
    switch (rc) {
      case CURLE_COULDNT_CONNECT:
        return Failure::kRefused;
      case CURLE_COULDNT_RESOLVE_HOST:
        return Failure::kResolve;
      case CURLE_OPERATION_TIMEDOUT:
        return tls_connected ? Failure::kTimeout : Failure::kConnectTimeout;
      case CURLE_PEER_FAILED_VERIFICATION:
        // libcurl reports both an unknown issuer and a name mismatch here;
        // the fixes differ, so tell them apart by its message.
        if (contains(detail, "subject name") ||
            contains(detail, "does not match") ||
            contains(detail, "no alternative certificate")) {
          return Failure::kTlsHostname;
        }
        return Failure::kTlsVerify;
      case CURLE_SSL_CONNECT_ERROR:
        // A TLS alert or protocol mismatch is a real refusal; an EOF or
        // reset mid-handshake is a server going away (k3s restarting), and
        // nothing was sent yet, so it is worth retrying.
        if (contains(detail, "alert") || contains(detail, "wrong version") ||
            contains(detail, "certificate") || contains(detail, "protocol") ||
            contains(detail, "handshake failure")) {
          return Failure::kTlsHandshake;
        }
        return Failure::kRefused;
      case CURLE_SSL_CERTPROBLEM:
      case CURLE_SSL_CACERT_BADFILE:
      case CURLE_SSL_CIPHER:
      case CURLE_SSL_ENGINE_NOTFOUND:
      case CURLE_SSL_ENGINE_SETFAILED:
        return Failure::kLocalCert;
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
        // With TLS 1.3 the server's verdict on our certificate arrives as
        // an alert on the first read, not in the handshake.
        if (contains(detail, "alert")) return Failure::kTlsHandshake;
        return Failure::kConnectionLost;
      case CURLE_GOT_NOTHING:
      case CURLE_PARTIAL_FILE:
        return Failure::kConnectionLost;
      default:
        return Failure::kOther;
    }
  }

  // Sets every option for one request on a freshly reset handle (reset
  // keeps the live connection and TLS session, so they are reused).
  std::optional<TransportError> configure(
      CURL* h, const HttpRequest& request, std::chrono::milliseconds timeout,
      std::chrono::milliseconds connect_timeout, Transfer& transfer,
      char* errbuf, CurlSlistPtr& headers) {
    curl_easy_reset(h);
    std::string failed;
    auto set = [&](CURLoption option, auto value, const char* name) {
      if (!failed.empty()) return;
      const CURLcode rc = curl_easy_setopt(h, option, value);
      if (rc != CURLE_OK)
        failed = std::string(name) + ": " + curl_easy_strerror(rc);
    };
    const std::string url = config_.server + request.target;
    set(CURLOPT_URL, url.c_str(), "CURLOPT_URL");
    set(CURLOPT_ERRORBUFFER, errbuf, "CURLOPT_ERRORBUFFER");
    set(CURLOPT_NOSIGNAL, 1L, "CURLOPT_NOSIGNAL");
    set(CURLOPT_PROTOCOLS_STR, "https", "CURLOPT_PROTOCOLS_STR");
    set(CURLOPT_FOLLOWLOCATION, 0L, "CURLOPT_FOLLOWLOCATION");
    set(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1),
        "CURLOPT_HTTP_VERSION");
    set(CURLOPT_NOPROXY, no_proxy_.c_str(), "CURLOPT_NOPROXY");
    set(CURLOPT_TCP_KEEPALIVE, 1L, "CURLOPT_TCP_KEEPALIVE");

    // Trust exactly the kubeconfig's CA: no system bundle or directory.
    set(CURLOPT_SSL_VERIFYPEER, 1L, "CURLOPT_SSL_VERIFYPEER");
    set(CURLOPT_SSL_VERIFYHOST, 2L, "CURLOPT_SSL_VERIFYHOST");
    set(CURLOPT_CAINFO, static_cast<const char*>(nullptr), "CURLOPT_CAINFO");
    set(CURLOPT_CAPATH, static_cast<const char*>(nullptr), "CURLOPT_CAPATH");
    curl_blob ca{config_.ca_pem.data(), config_.ca_pem.size(),
                 CURL_BLOB_NOCOPY};
    set(CURLOPT_CAINFO_BLOB, &ca, "CURLOPT_CAINFO_BLOB");
    // NOCOPY: libcurl would free its copies of the key without wiping
    // them; ours are wiped when the transport goes away.
    curl_blob cert{config_.client_cert_pem.data(),
                   config_.client_cert_pem.size(), CURL_BLOB_NOCOPY};
    curl_blob key{config_.client_key_pem.data(), config_.client_key_pem.size(),
                  CURL_BLOB_NOCOPY};
    if (!config_.client_cert_pem.empty()) {
      set(CURLOPT_SSLCERT_BLOB, &cert, "CURLOPT_SSLCERT_BLOB");
      set(CURLOPT_SSLCERTTYPE, "PEM", "CURLOPT_SSLCERTTYPE");
      set(CURLOPT_SSLKEY_BLOB, &key, "CURLOPT_SSLKEY_BLOB");
      set(CURLOPT_SSLKEYTYPE, "PEM", "CURLOPT_SSLKEYTYPE");
    }

    std::vector<std::string> lines{"Accept: " + request.accept, "Expect:"};
    if (!request.content_type.empty()) {
      lines.push_back("Content-Type: " + request.content_type);
    }
    if (!config_.token.empty())
      lines.push_back("Authorization: Bearer " + config_.token);
    for (const auto& line : lines) {
      curl_slist* next = curl_slist_append(headers.get(), line.c_str());
      if (!next) return TransportError{Failure::kOther, "out of memory"};
      (void)headers.release();
      headers.reset(next);
    }
    set(CURLOPT_HTTPHEADER, headers.get(), "CURLOPT_HTTPHEADER");
    set(CURLOPT_USERAGENT, "gpunode/" GPUNODE_VERSION, "CURLOPT_USERAGENT");

    if (request.method == "GET") {
      set(CURLOPT_HTTPGET, 1L, "CURLOPT_HTTPGET");
    } else {
      set(CURLOPT_CUSTOMREQUEST, request.method.c_str(),
          "CURLOPT_CUSTOMREQUEST");
      if (!request.content_type.empty()) {
        set(CURLOPT_POSTFIELDSIZE_LARGE,
            static_cast<curl_off_t>(request.body.size()),
            "CURLOPT_POSTFIELDSIZE_LARGE");
        set(CURLOPT_POSTFIELDS, request.body.c_str(), "CURLOPT_POSTFIELDS");
      }
    }

    set(CURLOPT_TIMEOUT_MS,
        static_cast<long>(std::max<long long>(timeout.count(), 1)),
        "CURLOPT_TIMEOUT_MS");
    set(CURLOPT_CONNECTTIMEOUT_MS,
        static_cast<long>(std::max<long long>(connect_timeout.count(), 1)),
        "CURLOPT_CONNECTTIMEOUT_MS");
    // A quiet watch sends nothing for minutes; only the deadline ends it.
    set(CURLOPT_LOW_SPEED_LIMIT, 0L, "CURLOPT_LOW_SPEED_LIMIT");
    set(CURLOPT_LOW_SPEED_TIME, 0L, "CURLOPT_LOW_SPEED_TIME");

    // A Ctrl-C must not wait out a quiet watch: libcurl calls this about
    // once a second, and a non-zero return aborts the transfer.
    set(CURLOPT_XFERINFOFUNCTION, &on_progress, "CURLOPT_XFERINFOFUNCTION");
    set(CURLOPT_NOPROGRESS, 0L, "CURLOPT_NOPROGRESS");
    set(CURLOPT_WRITEFUNCTION, &on_write, "CURLOPT_WRITEFUNCTION");
    set(CURLOPT_WRITEDATA, static_cast<void*>(&transfer), "CURLOPT_WRITEDATA");
    set(CURLOPT_HEADERFUNCTION, &on_header, "CURLOPT_HEADERFUNCTION");
    set(CURLOPT_HEADERDATA, static_cast<void*>(&transfer),
        "CURLOPT_HEADERDATA");
    if (!failed.empty()) {
      return TransportError{Failure::kLocalCert,
                            "this libcurl (" + std::string(curl_version()) +
                                ") refused " + failed};
    }
    return std::nullopt;
  }

  // Handles are pooled rather than shared: a watch callback may issue
  // other requests while its own transfer is still running.
  CurlPtr take_handle() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        CurlPtr h = std::move(idle_.back());
        idle_.pop_back();
        return h;
      }
    }
    return CurlPtr(curl_easy_init());
  }

  void give_back(CurlPtr handle) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < 4) idle_.push_back(std::move(handle));
  }

  Kubeconfig config_;
  std::string no_proxy_;
  std::mutex mu_;
  std::vector<CurlPtr> idle_;
};

// The CA must hold at least one certificate; libcurl would otherwise fail
// with a generic "error setting certificate" on the first request.
Result<void> check_ca(const std::string& ca_pem, const std::string& source) {
  BioPtr bio = memory_bio(ca_pem);
  X509Ptr first(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)
                    : nullptr);
  if (!first) {
    return Error{ExitCode::kUsage,
                 "kubeconfig",
                 source +
                     ": the certificate authority does not parse as a PEM "
                     "certificate (" +
                     openssl_error() + ")",
                 {}};
  }
  return {};
}

// A key that does not belong to the certificate fails the handshake with an
// unhelpful message; name it here instead.
Result<void> check_key_matches(const Kubeconfig& config) {
  BioPtr cert_bio = memory_bio(config.client_cert_pem);
  X509Ptr cert(
      cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr)
               : nullptr);
  BioPtr key_bio = memory_bio(config.client_key_pem);
  EvpPkeyPtr key(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr,
                                                   nullptr, nullptr)
                         : nullptr);
  if (!key) {
    return Error{ExitCode::kUsage,
                 "kubeconfig",
                 config.source +
                     ": the client key does not parse as a PEM "
                     "private key (" +
                     openssl_error() + ")",
                 {}};
  }
  if (!cert || X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Error{ExitCode::kUsage, "kubeconfig",
                 config.source +
                     ": the client key does not belong to the "
                     "client certificate",
                 "use a kubeconfig whose client-certificate-data and "
                 "client-key-data come from the same pair "
                 "(/etc/rancher/k3s/k3s.yaml)"};
  }
  return {};
}

}  // namespace

Result<void> check_client_certificate(
    const std::string& cert_pem, const std::string& source,
    std::chrono::system_clock::time_point now) {
  BioPtr bio = memory_bio(cert_pem);
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)
                   : nullptr);
  if (!cert) {
    return Error{ExitCode::kUsage,
                 "kubeconfig",
                 source +
                     ": the client certificate does not parse as a PEM "
                     "certificate (" +
                     openssl_error() + ")",
                 {}};
  }
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  const ASN1_TIME* not_after = X509_get0_notAfter(cert.get());
  const ASN1_TIME* not_before = X509_get0_notBefore(cert.get());
  // X509_cmp_time: -1 when the certificate's time is before `t`, 1 after,
  // 0 when it cannot be read.
  const int after_cmp = X509_cmp_time(not_after, &t);
  const int before_cmp = X509_cmp_time(not_before, &t);
  if (after_cmp == 0 || before_cmp == 0) {
    ERR_clear_error();
    return Error{ExitCode::kUsage,
                 "kubeconfig",
                 source +
                     ": the client certificate's validity dates cannot be "
                     "read",
                 {}};
  }
  if (after_cmp < 0) {
    return Error{ExitCode::kBlocked, "cluster",
                 "the client certificate in " + source + " expired on " +
                     asn1_date(not_after) + " (it is now " + utc_date(now) +
                     "); the API server would refuse it",
                 "k3s renews its certificates when it starts within 90 days of "
                 "expiry: sudo systemctl restart k3s (or sudo k3s certificate "
                 "rotate, then restart k3s), then use the fresh "
                 "/etc/rancher/k3s/k3s.yaml; for another kubeconfig, get a "
                 "fresh one"};
  }
  if (before_cmp > 0) {
    return Error{ExitCode::kBlocked, "cluster",
                 "the client certificate in " + source +
                     " is not valid before " + asn1_date(not_before) +
                     " (it is now " + utc_date(now) + ")",
                 "check this machine's clock (timedatectl), or get a fresh "
                 "kubeconfig"};
  }
  return {};
}

Result<std::unique_ptr<Transport>> make_curl_transport(
    const Kubeconfig& config) {
  static std::once_flag once;
  static CURLcode init = CURLE_OK;
  // curl_global_init is not thread-safe; do it once, before any handle.
  std::call_once(once, [] { init = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (init != CURLE_OK) {
    return Error{
        ExitCode::kCannotRun,
        "cluster",
        std::string("cannot initialise libcurl: ") + curl_easy_strerror(init),
        {}};
  }
  // The in-memory certificate options need libcurl 7.77 with OpenSSL;
  // refuse an older or different build instead of writing keys to files.
  const curl_version_info_data* info = curl_version_info(CURLVERSION_NOW);
  const std::string ssl = info && info->ssl_version ? info->ssl_version : "";
  if (!info || info->version_num < 0x074D00 || ssl.rfind("OpenSSL", 0) != 0) {
    return Error{ExitCode::kCannotRun, "cluster",
                 "this libcurl (" + std::string(curl_version()) +
                     ") cannot take TLS certificates from memory; gpunode "
                     "needs libcurl 7.77 or newer built with OpenSSL",
                 "install libcurl4 (the OpenSSL flavour), e.g. apt-get install "
                 "libcurl4"};
  }
  return std::unique_ptr<Transport>(std::make_unique<CurlTransport>(config));
}

}  // namespace detail

Result<std::unique_ptr<Client>> Client::connect(const Kubeconfig& config,
                                                Clock& clock,
                                                RetryPolicy retry) {
  if (config.ca_pem.empty()) {
    return Error{ExitCode::kUsage,
                 "kubeconfig",
                 config.source +
                     ": no certificate authority; gpunode always "
                     "verifies the API server",
                 {}};
  }
  if (auto ca = detail::check_ca(config.ca_pem, config.source); !ca) {
    return ca.error();
  }
  if (!config.client_cert_pem.empty()) {
    if (auto valid = detail::check_client_certificate(
            config.client_cert_pem, config.source, clock.now());
        !valid) {
      return valid.error();
    }
    if (auto pair = detail::check_key_matches(config); !pair)
      return pair.error();
  }
  auto transport = detail::make_curl_transport(config);
  if (!transport) return transport.error();
  return detail::make_client(std::move(*transport),
                             detail::Endpoint{config.source, config.server},
                             clock, retry);
}

}  // namespace gpunode::kube
