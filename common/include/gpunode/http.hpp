// The HTTP stack that the Kubernetes client (installer/kube) and the
// registry pull (bundle/registry_pull.cpp) share: the request and response
// types, the transport seam (libcurl in production, http_curl.hpp; a script
// in unit tests), the retry arithmetic (backoff with jitter, Retry-After)
// and the retry loop with its deadline and interrupt checks. Nothing here
// knows about Kubernetes, registries or libcurl.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "gpunode/host.hpp"
#include "gpunode/result.hpp"

namespace gpunode::http {

struct HttpRequest {
  std::string method = "GET";
  // Appended to the transport's base URL: an API path with its query
  // ("/api/v1/nodes?watch=1"), or a whole URL when the base is empty.
  std::string target;
  std::string content_type;  // empty: no body
  std::string body;
  std::string accept = "application/json";  // empty: libcurl's "*/*"
  std::vector<std::string> headers;         // more "Name: value" lines
  // A body collected in memory (no on_data, or an answer that is not 2xx)
  // may hold this much; past it the transfer fails (Failure::kTooLarge),
  // or with truncate_body the rest is dropped (an error page's start is
  // enough for a message).
  std::size_t max_body = std::size_t{64} << 20;
  bool truncate_body = false;
  // Called with each response's status once its headers are in (a
  // redirect gives several), before its body: a resumed download must know
  // whether the server sent the range (206) or everything again (200).
  std::function<void(int status)> on_status;
};

struct HttpResponse {
  int status = 0;
  std::string body;  // empty when it went to the streaming callback
  std::optional<std::chrono::seconds> retry_after;
  std::map<std::string, std::string> headers;  // the last response's,
                                               // names in lower case
  bool stopped = false;  // the streaming callback asked to stop
  // The URL that gave this answer: the request's, or the last redirect's.
  std::string final_url;
};

// Why no HTTP response came back. The kinds are what the operator can act
// on, so they map onto distinct messages and fixes.
enum class Failure {
  kRefused,         // nothing listens: the server is not running (yet)
  kResolve,         // the server's host name does not resolve
  kConnectTimeout,  // no answer to the TCP connect
  kTimeout,         // the transfer ran past its time limit
  kTlsVerify,       // the server's certificate is not signed by our CA
  kTlsHostname,     // signed, but not for this host name
  kTlsHandshake,    // e.g. the server rejected our client certificate
  kLocalCert,       // libcurl could not use our certificate or key
  kConnectionLost,  // sent (or maybe sent), then the connection broke
  kTooLarge,        // the body was larger than HttpRequest::max_body
  kOther,
};

struct TransportError {
  TransportError() = default;
  // Without a reason (no libcurl code: a handle or memory ran out) the
  // detail serves as one.
  TransportError(Failure k, std::string d, int code = 0, std::string r = {})
      : kind(k), detail(std::move(d)), curl_code(code), reason(std::move(r)) {
    if (reason.empty()) reason = detail;
  }

  Failure kind = Failure::kOther;
  std::string detail;  // libcurl's own words (its error buffer)
  int curl_code = 0;   // CURLcode, 0 when libcurl did not fail
  std::string reason;  // curl_easy_strerror(curl_code): the short form
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

struct RetryPolicy {
  std::chrono::milliseconds first_backoff{200};
  std::chrono::milliseconds max_backoff{5000};
  // One request stops retrying after this long even when the run's deadline
  // is further away: an API server that restarts is back within it, and one
  // that is down should be reported, not waited on for the whole --timeout.
  std::chrono::milliseconds give_up_after{60000};
};

// The delay before retry number `retry` (1 = the first retry): exponential
// from first_backoff, capped at max_backoff, then "equal jitter": the upper
// half of that window is random, so clients that failed together do not
// come back together, while the delay still grows. jitter 1 gives the
// whole window.
std::chrono::milliseconds backoff_delay(const RetryPolicy& policy, int retry,
                                        double jitter);

// Retry-After as delta-seconds (what kube-apiserver and registries send);
// an HTTP date or garbage yields nullopt, and the caller falls back to its
// own backoff.
std::optional<std::chrono::seconds> parse_retry_after(std::string_view value);

// 429, 500, 502, 503, 504: the server says "not now", not "no".
bool is_retryable_status(int http_status);

// Percent-encoding for a query value (RFC 3986: all but unreserved).
std::string url_encode(const std::string& s);

// A random value in [0, 1), one generator per thread.
double random_jitter();

// --- the retry loop ---------------------------------------------------

// What one attempt is given: its number (1 = the first) and the time left
// before the deadline.
struct Attempt {
  int number = 0;
  std::chrono::milliseconds remaining{0};
};

// What one attempt says happened.
struct Step {
  enum class Kind {
    kDone,   // a result: stop
    kFail,   // an error retrying cannot cure: stop with it
    kRetry,  // try again after a backoff (or the server's Retry-After)
    kAgain,  // try again at once; not a failed attempt (e.g. a 401 that
             // an anonymous token answers)
  };
  Kind kind = Kind::kDone;
  Error error;  // kFail, kRetry: the cause
  std::optional<std::chrono::milliseconds> retry_after;

  static Step done() { return {}; }
  static Step fail(Error e) { return {Kind::kFail, std::move(e), {}}; }
  static Step retry(Error e,
                    std::optional<std::chrono::milliseconds> after = {}) {
    return {Kind::kRetry, std::move(e), after};
  }
  static Step again() { return {Kind::kAgain, {}, {}}; }
};

using SteadyTime = std::chrono::steady_clock::time_point;

struct RetryPlan {
  RetryPolicy policy;
  std::function<double()> jitter;              // [0, 1]; empty: random_jitter
  int max_attempts = 0;                        // 0: no limit but time
  SteadyTime deadline = SteadyTime::max();     // no attempt starts after it
  SteadyTime retry_until = SteadyTime::max();  // no retry ends after it
  std::string layer;                           // for the interrupted error
  // The deadline passed before attempt `attempts + 1` could start.
  std::function<Error(int attempts)> on_deadline;
  // No attempt or no time is left for another try after `last` (a kRetry
  // step); `attempts` were made.
  std::function<Error(const Step& last, int attempts)> on_give_up;
};

// When the next try may start after `attempts` failed ones, or nullopt when
// that would be at or past `until`: the server's Retry-After if it sent
// one, else backoff_delay.
std::optional<std::chrono::milliseconds> next_delay(
    const RetryPolicy& policy, int attempts,
    std::optional<std::chrono::milliseconds> retry_after, double jitter,
    SteadyTime now, SteadyTime until);

// Runs `attempt` until it is done or fails, retrying kRetry steps with
// backoff. A Ctrl-C (interrupt.hpp) ends it before each attempt and after
// each one that did not succeed, as interrupted_error(plan.layer).
Result<void> retry(Clock& clock, const RetryPlan& plan,
                   const std::function<Step(const Attempt&)>& attempt);

}  // namespace gpunode::http
