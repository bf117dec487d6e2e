// A small Kubernetes API client over libcurl: kubeconfig loading, GET/LIST,
// server-side apply, DELETE, POST, pod logs and watch. TLS is always verified
// against the kubeconfig's CA; client certificates and keys are handed to
// libcurl from memory, never written to disk.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/host.hpp"
#include "gpunode/http.hpp"
#include "gpunode/result.hpp"

namespace gpunode::kube {

using json = nlohmann::json;

struct Kubeconfig {
  std::string source;           // the file it came from (for messages)
  std::string context;          // the context used
  std::string server;           // e.g. https://127.0.0.1:6443
  std::string ca_pem;           // required: there is no "insecure" mode
  std::string client_cert_pem;  // client-certificate auth (k3s's admin)
  std::string client_key_pem;
  std::string token;  // bearer-token auth
  // The files the key and the token were read from when the kubeconfig
  // names them (client-key, tokenFile) instead of embedding them; empty
  // when embedded. A kubeconfig of paths (the kubelet's) holds no secret.
  std::string client_key_file;
  std::string token_file;
  // Not blocking, but worth acting on (e.g. credentials readable by others).
  std::vector<std::string> warnings;
};

// Reads a kubeconfig (a host path, under --root): k3s's shape
// (certificate-authority-data, client-certificate-data, client-key-data)
// and general ones (current-context; file paths, relative to the
// kubeconfig's folder, instead of data; token or tokenFile). Errors name the
// file and the key: ExitCode::kUsage for malformed content,
// ExitCode::kCannotRun when it cannot be read (k3s.yaml is 0600: not root),
// ExitCode::kBlocked when it does not exist (k3s not started, or an agent
// node: it has no admin kubeconfig).
Result<Kubeconfig> load_kubeconfig(const FileSystem& fs,
                                   const std::string& host_path);
// The same from text; `read_file` reads the files a kubeconfig may point to.
Result<Kubeconfig> parse_kubeconfig(
    const std::string& yaml, const std::string& source,
    const std::function<Result<std::string>(const std::string&)>& read_file);

// Backoff and the per-request retry limit: the shared HTTP stack's.
using RetryPolicy = http::RetryPolicy;

enum class WatchStep { kContinue, kDone };

class Client {
 public:
  // Checks the client certificate's validity period first, so an expired
  // one is named as such instead of surfacing as a TLS alert.
  static Result<std::unique_ptr<Client>> connect(const Kubeconfig& config,
                                                 Clock& clock,
                                                 RetryPolicy retry = {});
  virtual ~Client() = default;

  // Every call is bounded by `deadline`: connection errors, 429 (honouring
  // Retry-After) and 5xx are retried with exponential backoff and jitter
  // until then. Kubernetes Status bodies become Errors whose `status` is the
  // HTTP code and whose message carries the Status message and causes.
  // Giving up (the next retry would end past the deadline) returns the last
  // cause's Error (layer "cluster", ExitCode::kBlocked for an unreachable or
  // failing server, with its fix) plus "gave up after N attempts";
  // ExitCode::kTimeout means the deadline passed before a request could be
  // sent, or a transfer ran into it. create() (POST) is retried only when
  // the server certainly did not act (connection refused, 429); remove() of
  // something already gone is false, not an error.
  // Paths are API paths, e.g.
  // "/apis/apps/v1/namespaces/kube-system/daemonsets/x".
  virtual Result<std::optional<json>> get(
      const std::string& path,
      std::chrono::steady_clock::time_point deadline) = 0;
  virtual Result<json> list(const std::string& path,
                            std::chrono::steady_clock::time_point deadline) = 0;
  // Server-side apply: PATCH application/apply-patch+yaml,
  // fieldManager=gpunode, force=true. Returns the object as stored.
  virtual Result<json> apply(
      const std::string& path, const json& object,
      std::chrono::steady_clock::time_point deadline) = 0;
  virtual Result<json> create(
      const std::string& collection_path, const json& object,
      std::chrono::steady_clock::time_point deadline) = 0;
  // false when it was already gone (404).
  virtual Result<bool> remove(
      const std::string& path,
      std::chrono::steady_clock::time_point deadline) = 0;
  virtual Result<std::string> get_text(
      const std::string& path,
      std::chrono::steady_clock::time_point deadline) = 0;
  // Lists `collection_path` (with `field_selector`, may be empty), hands each
  // item to `on_event` as "ADDED", then watches from the list's
  // resourceVersion and hands on every event, until `on_event` says kDone
  // (returns ok) or the deadline passes (ExitCode::kTimeout). Reconnects
  // when the stream ends and lists again on 410 Gone.
  virtual Result<void> watch(
      const std::string& collection_path, const std::string& field_selector,
      const std::function<WatchStep(const std::string& type,
                                    const json& object)>& on_event,
      std::chrono::steady_clock::time_point deadline) = 0;
};

}  // namespace gpunode::kube
