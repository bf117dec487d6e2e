// Internals of the Kubernetes client, split so that the parts worth testing
// without a server are reachable: the transport seam (libcurl in
// production, a script in unit tests), Status decoding, retry arithmetic and
// the client-certificate check.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "gpunode/kube.hpp"

namespace gpunode::kube::detail {

struct HttpRequest {
  std::string method;  // GET, PATCH, POST, DELETE
  std::string target;  // API path with its query, e.g. "/api/v1/nodes?watch=1"
  std::string content_type;  // empty: no body
  std::string body;
  std::string accept = "application/json";
};

struct HttpResponse {
  int status = 0;
  std::string body;  // empty when it went to the streaming callback
  std::optional<std::chrono::seconds> retry_after;
  bool stopped = false;  // the streaming callback asked to stop
};

// Why no HTTP response came back. The kinds are what the operator can act
// on, so they map onto distinct messages and fixes.
enum class Failure {
  kRefused,         // nothing listens: k3s is not running (yet)
  kResolve,         // the server's host name does not resolve
  kConnectTimeout,  // no answer to the TCP connect
  kTimeout,         // the transfer ran past its time limit
  kTlsVerify,       // the server's certificate is not signed by our CA
  kTlsHostname,     // signed, but not for this host name
  kTlsHandshake,    // e.g. the server rejected our client certificate
  kLocalCert,       // libcurl could not use our certificate or key
  kConnectionLost,  // sent (or maybe sent), then the connection broke
  kOther,
};

struct TransportError {
  Failure kind = Failure::kOther;
  std::string detail;  // libcurl's own words, for the message
};

using Outcome = std::variant<HttpResponse, TransportError>;
// Receives the body of a 2xx response as it arrives; false stops the
// transfer (HttpResponse::stopped), which is not an error.
using OnData = std::function<bool(std::string_view)>;

class Transport {
 public:
  virtual ~Transport() = default;
  // `timeout` bounds the whole transfer; `connect_timeout` the TCP and TLS
  // connect. Without `on_data` the body is collected in the response.
  virtual Outcome perform(const HttpRequest& request,
                          std::chrono::milliseconds timeout,
                          std::chrono::milliseconds connect_timeout,
                          const OnData& on_data) = 0;
};

// What messages need to know about where the client points.
struct Endpoint {
  std::string source;  // the kubeconfig's path
  std::string server;  // https://host:port
};

// The Client logic (retries, Status errors, watch) over any transport.
// `jitter` returns values in [0, 1); empty means a random generator.
std::unique_ptr<Client> make_client(std::unique_ptr<Transport> transport,
                                    Endpoint endpoint, Clock& clock,
                                    RetryPolicy retry,
                                    std::function<double()> jitter = {});

// The libcurl transport: TLS verified against the kubeconfig's CA only,
// client certificate and key handed over from memory.
Result<std::unique_ptr<Transport>> make_curl_transport(
    const Kubeconfig& config);

// The delay before retry number `retry` (1 = the first retry): exponential
// from first_backoff, capped at max_backoff, then "equal jitter": the upper
// half of that window is random, so clients that failed together do not
// come back together, while the delay still grows.
std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int retry,
                                        double jitter);

// Retry-After as delta-seconds (what kube-apiserver sends); an HTTP date or
// garbage yields nullopt, and the caller falls back to its own backoff.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value);

// 429, 500, 502, 503, 504: the server says "not now", not "no".
bool is_retryable_status(int http_status);

// An HTTP error response as an Error in the operator's terms: a Kubernetes
// Status body gives "<VERB> <path>: <message> (<code> <reason>)" plus the
// causes of a 422; 401/403 say the kubeconfig's credentials were refused.
Error http_error(const std::string& verb, const std::string& path,
                 int http_status, const std::string& body,
                 const Endpoint& endpoint);

// A transport failure as an Error with a plain message and a fix.
Error transport_error(const std::string& verb, const std::string& path,
                      const TransportError& failure, const Endpoint& endpoint);

// Refuses a client certificate that is expired or not yet valid at `now`,
// naming the kubeconfig and the date; also refuses one that does not parse.
Result<void> check_client_certificate(
    const std::string& cert_pem, const std::string& source,
    std::chrono::system_clock::time_point now);

}  // namespace gpunode::kube::detail
