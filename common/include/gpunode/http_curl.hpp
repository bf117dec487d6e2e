// The libcurl transport of the shared HTTP stack (http.hpp). TLS is always
// verified; each caller keeps its own trust source: exactly one CA given in
// memory (the kubeconfig's), a CA file (--registry-ca), or the system CAs.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "gpunode/http.hpp"
#include "gpunode/result.hpp"

namespace gpunode::http {

struct CurlOptions {
  // Prefixed to every request's target; empty: targets are whole URLs.
  std::string base_url;
  // Trust: ca_pem alone (no system bundle or directory) when set, else
  // ca_file instead of the system CAs when set, else the system CAs.
  std::string ca_pem;
  std::string ca_file;
  // A client certificate and key handed over from memory (CURLOPT_*_BLOB),
  // never written to a file; the key is wiped when the transport goes.
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string bearer_token;       // sent as Authorization; wiped likewise
  bool allow_plain_http = false;  // else https only, redirects included
  bool follow_redirects = false;  // at most 10
  bool http1_only = false;
  bool tcp_keepalive = false;
  std::string no_proxy;  // CURLOPT_NOPROXY; empty: libcurl's own rules
  // Under `low_speed_bytes` per second for `low_speed_seconds` fails the
  // transfer (Failure::kTimeout); 0: only the timeout ends a quiet one.
  long low_speed_bytes = 0;
  long low_speed_seconds = 0;
  // The layer named in an Error from make_curl_transport.
  std::string layer;
};

// Fails (ExitCode::kCannotRun) when libcurl does not start, or when the
// options hand over certificates in memory and this libcurl cannot take
// them (it needs 7.77 with OpenSSL).
Result<std::unique_ptr<Transport>> make_curl_transport(CurlOptions options);

}  // namespace gpunode::http
