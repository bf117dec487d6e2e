// Internals of the Kubernetes client, split so that the parts worth testing
// without a server are reachable: the client over any transport (the shared
// HTTP stack's seam, gpunode/http.hpp), Status decoding and the
// client-certificate check.
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

// The shared HTTP stack's types and arithmetic
// (common/include/gpunode/http.hpp), named here as the client has always named
// them.
using http::backoff_delay;
using http::Failure;
using http::HttpRequest;
using http::HttpResponse;
using http::is_retryable_status;
using http::OnData;
using http::Outcome;
using http::parse_retry_after;
using http::Transport;
using http::TransportError;

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

// The shared libcurl transport (gpunode/http_curl.hpp) set up for the API
// server: TLS verified against the kubeconfig's CA only, client
// certificate and key handed over from memory.
Result<std::unique_ptr<Transport>> make_curl_transport(
    const Kubeconfig& config);

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
