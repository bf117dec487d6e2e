// Client::connect and the checks before it: the kubeconfig's CA, client
// certificate and key are refused with a plain message when unusable. The
// transport is the shared libcurl one (gpunode/http_curl.hpp): TLS verified
// against the kubeconfig's CA only, the client certificate and key handed
// over from memory, never written to a file.
#include <openssl/err.h>
#include <openssl/pem.h>

#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpunode/http_curl.hpp"
#include "gpunode/openssl_handles.hpp"
#include "kube/http.hpp"

namespace gpunode::kube {
namespace detail {
namespace {

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
  http::CurlOptions options;
  options.base_url = config.server;
  options.ca_pem = config.ca_pem;
  options.client_cert_pem = config.client_cert_pem;
  options.client_key_pem = config.client_key_pem;
  options.bearer_token = config.token;
  options.http1_only = true;
  options.tcp_keepalive = true;
  options.no_proxy = no_proxy_list();
  // A quiet watch sends nothing for minutes; only the deadline ends it
  // (low_speed stays 0).
  options.layer = "cluster";
  return http::make_curl_transport(std::move(options));
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
