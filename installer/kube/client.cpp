// The Client's logic over a Transport: retries bounded by the caller's
// deadline, Kubernetes Status bodies turned into Errors, and list-then-watch
// with resourceVersion tracking. Nothing here knows about libcurl, so unit
// tests drive it with a scripted transport and a fake clock.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <regex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "gpunode/crash_point.hpp"
#include "gpunode/interrupt.hpp"
#include "kube/http.hpp"

namespace gpunode::kube::detail {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyTime = std::chrono::steady_clock::time_point;

// One attempt of a normal request may take this long before it is retried:
// long enough for a large LIST, short enough that a hung connection does not
// eat the whole deadline.
constexpr milliseconds kAttemptCap{60000};
constexpr milliseconds kConnectCap{10000};
// Server-side watch length: the server ends the stream after this and we
// reconnect from the last resourceVersion (client-go uses 5-10 minutes).
constexpr long kMaxWatchSeconds = 300;

std::string reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 406:
      return "Not Acceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "Request Entity Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "HTTP " + std::to_string(status);
  }
}

// The path without its query: messages name the resource, not our flags.
std::string path_only(const std::string& target) {
  return target.substr(0, target.find('?'));
}

std::string with_query(const std::string& path, const std::string& query) {
  if (query.empty()) return path;
  return path + (path.find('?') == std::string::npos ? "?" : "&") + query;
}

std::string one_line(std::string text, std::size_t max) {
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  if (text.size() > max) text = text.substr(0, max) + "...";
  return text;
}

// Fields of server JSON read without trusting its types: a malformed body
// must give an error message, not an exception.
std::string string_field(const json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

int int_field(const json& object, const char* key) {
  if (!object.is_object()) return 0;
  const auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int>() : 0;
}

std::string resource_version(const json& object) {
  if (!object.is_object()) return {};
  auto meta = object.find("metadata");
  if (meta == object.end() || !meta->is_object()) return {};
  auto rv = meta->find("resourceVersion");
  if (rv == meta->end() || !rv->is_string()) return {};
  return rv->get<std::string>();
}

std::string seconds_text(milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs",
                static_cast<double>(d.count()) / 1000.0);
  return buf;
}

// Which requests may be sent again after a failure.
enum class RetryMode {
  kIdempotent,  // GET, LIST, apply (PATCH), DELETE: sending twice is harmless
  kUnsent,      // POST: only when the server certainly did not act on it
};

bool failure_is_retryable(Failure kind, RetryMode mode) {
  switch (kind) {
    case Failure::kRefused:
    case Failure::kConnectTimeout:
      return true;  // nothing was sent
    case Failure::kConnectionLost:
    case Failure::kTimeout:
      return mode == RetryMode::kIdempotent;  // it may have landed
    default:
      return false;  // configuration problems: retrying changes nothing
  }
}

// Whether a transfer that timed out ran into the caller's deadline (its
// limit was all the time left) rather than into our own per-attempt cap:
// the first is "timed out waiting", not a server fault to report or retry.
bool ran_into_deadline(const TransportError& failure, milliseconds timeout,
                       milliseconds connect_timeout, milliseconds remaining,
                       SteadyTime now, SteadyTime deadline) {
  if (failure.kind != Failure::kTimeout &&
      failure.kind != Failure::kConnectTimeout) {
    return false;
  }
  if (now >= deadline) return true;
  return failure.kind == Failure::kTimeout ? timeout >= remaining
                                           : connect_timeout >= remaining;
}

bool status_is_retryable(int status, RetryMode mode) {
  if (!is_retryable_status(status)) return false;
  // 429 comes from the API server's admission of requests (max-in-flight,
  // priority and fairness), before any handler ran: safe even for POST.
  return mode == RetryMode::kIdempotent || status == 429;
}

class HttpClient : public Client {
 public:
  HttpClient(std::unique_ptr<Transport> transport, Endpoint endpoint,
             Clock& clock, RetryPolicy retry, std::function<double()> jitter)
      : transport_(std::move(transport)),
        endpoint_(std::move(endpoint)),
        clock_(clock),
        retry_(retry),
        jitter_(std::move(jitter)) {
    // One generator per thread: a Client may be shared between threads.
    if (!jitter_) jitter_ = http::random_jitter;
  }

  Result<std::optional<json>> get(const std::string& path,
                                  SteadyTime deadline) override {
    auto r =
        exchange(request("GET", path), RetryMode::kIdempotent, deadline, {404});
    if (!r) return r.error();
    if (r->response.status == 404) return std::optional<json>{};
    auto body = parse_body("GET", path, r->response);
    if (!body) return body.error();
    return std::optional<json>(std::move(*body));
  }

  Result<json> list(const std::string& path, SteadyTime deadline) override {
    auto r = exchange(request("GET", path), RetryMode::kIdempotent, deadline);
    if (!r) return r.error();
    return parse_body("GET", path, r->response);
  }

  Result<json> apply(const std::string& path, const json& object,
                     SteadyTime deadline) override {
    HttpRequest req =
        request("PATCH", with_query(path, "fieldManager=gpunode&force=true"));
    // JSON is YAML, so the apply-patch+yaml content type takes it as is.
    req.content_type = "application/apply-patch+yaml";
    req.body = object.dump();
    auto r = exchange(req, RetryMode::kIdempotent, deadline);
    if (!r) return r.error();
    return parse_body("PATCH", path, r->response);
  }

  Result<json> create(const std::string& collection_path, const json& object,
                      SteadyTime deadline) override {
    HttpRequest req = request("POST", collection_path);
    req.content_type = "application/json";
    req.body = object.dump();
    auto r = exchange(req, RetryMode::kUnsent, deadline, {409});
    if (!r) return r.error();
    if (r->response.status == 409) {
      // After a retry, AlreadyExists most likely means an earlier attempt
      // landed and only its answer was lost: hand back what is stored.
      const std::string name = string_field(
          object.is_object() && object.contains("metadata") ? object["metadata"]
                                                            : json(),
          "name");
      if (r->attempts > 1 && !name.empty()) {
        auto existing = get(path_only(collection_path) + "/" + name, deadline);
        if (!existing) return existing.error();
        if (*existing) return std::move(**existing);
      }
      return http_error("POST", collection_path, 409, r->response.body,
                        endpoint_);
    }
    return parse_body("POST", collection_path, r->response);
  }

  Result<bool> remove(const std::string& path, SteadyTime deadline) override {
    auto r = exchange(request("DELETE", path), RetryMode::kIdempotent, deadline,
                      {404});
    if (!r) return r.error();
    // A retried DELETE whose first attempt landed also ends here as 404:
    // either way the object is gone.
    return r->response.status != 404;
  }

  Result<std::string> get_text(const std::string& path,
                               SteadyTime deadline) override {
    HttpRequest req = request("GET", path);
    req.accept = "*/*";
    auto r = exchange(req, RetryMode::kIdempotent, deadline);
    if (!r) return r.error();
    return std::move(r->response.body);
  }

  Result<void> watch(
      const std::string& collection_path, const std::string& field_selector,
      const std::function<WatchStep(const std::string&, const json&)>& on_event,
      SteadyTime deadline) override;

 private:
  struct Exchanged {
    HttpResponse response;
    int attempts = 0;
  };

  // One attempt's verdict: a response to hand back, or an error with
  // whether (and after how long) to try again.
  struct Verdict {
    std::optional<HttpResponse> response;
    Error error;
    bool retry = false;
    std::optional<milliseconds> retry_after;
  };

  static HttpRequest request(std::string method, std::string target) {
    HttpRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    return r;
  }

  Result<json> parse_body(const std::string& verb, const std::string& path,
                          const HttpResponse& response) const {
    json body = json::parse(response.body, nullptr, false);
    if (body.is_discarded()) {
      return Error{ExitCode::kBlocked, "cluster",
                   verb + " " + path_only(path) +
                       ": the API server's answer is not JSON: " +
                       one_line(response.body, 120),
                   "check that " + endpoint_.server + " (from " +
                       endpoint_.source + ") is a Kubernetes API server",
                   response.status};
    }
    return body;
  }

  Error timeout_error(const std::string& verb, const std::string& path,
                      const std::string& what) const {
    return Error{ExitCode::kTimeout, "cluster",
                 verb + " " + path_only(path) + ": " + what,
                 "check the API server (sudo systemctl status k3s) or allow "
                 "more time (--timeout)"};
  }

  Verdict judge(const HttpRequest& req, const Outcome& outcome, RetryMode mode,
                const std::vector<int>& pass) const {
    Verdict v;
    if (const auto* failure = std::get_if<TransportError>(&outcome)) {
      v.error = transport_error(req.method, req.target, *failure, endpoint_);
      v.retry = failure_is_retryable(failure->kind, mode);
      return v;
    }
    const auto& response = std::get<HttpResponse>(outcome);
    if (response.status < 400 ||
        std::find(pass.begin(), pass.end(), response.status) != pass.end()) {
      v.response = response;
      return v;
    }
    v.error = http_error(req.method, req.target, response.status, response.body,
                         endpoint_);
    v.retry = status_is_retryable(response.status, mode);
    if (response.retry_after) v.retry_after = *response.retry_after;
    return v;
  }

  // The delay before the next attempt, or the Error to give up with when
  // that delay would end past the deadline.
  Result<milliseconds> next_delay(const Verdict& v, int attempts,
                                  SteadyTime deadline) const {
    if (auto delay = http::next_delay(retry_, attempts, v.retry_after,
                                      jitter_(), clock_.steady_now(), deadline))
      return *delay;
    return give_up(v.error, v.retry_after, attempts);
  }

  static Error give_up(Error e, std::optional<milliseconds> retry_after,
                       int attempts) {
    e.message += "; gave up after " + std::to_string(attempts) +
                 (attempts == 1 ? " attempt" : " attempts");
    if (retry_after) {
      e.message += " (the server asked to retry after " +
                   seconds_text(*retry_after) + ", past the deadline)";
    } else {
      e.message +=
          " (no time left for another within the deadline or the retry limit)";
    }
    return e;
  }

  Error note_attempts(Error e, int attempts) const {
    if (attempts > 1) {
      e.message += " (after " + std::to_string(attempts) + " attempts)";
    }
    return e;
  }

  // Sends `req` until it gets a response that is not retryable: status
  // < 400 or one listed in `pass` comes back as a response, anything else
  // as an Error naming the last cause and the number of attempts.
  Result<Exchanged> exchange(const HttpRequest& req, RetryMode mode,
                             SteadyTime deadline,
                             const std::vector<int>& pass = {}) {
    http::RetryPlan plan;
    plan.policy = retry_;
    plan.jitter = jitter_;
    plan.deadline = deadline;
    plan.retry_until =
        std::min(deadline, clock_.steady_now() + retry_.give_up_after);
    plan.layer = "cluster";
    plan.on_deadline = [&](int) {
      return timeout_error(
          req.method, req.target,
          "the deadline passed before the request could be sent");
    };
    plan.on_give_up = [](const http::Step& last, int attempts) {
      return give_up(last.error, last.retry_after, attempts);
    };
    Exchanged got;
    auto done = http::retry(
        clock_, plan, [&](const http::Attempt& attempt) -> http::Step {
          got.attempts = attempt.number;
          const milliseconds timeout = std::min(attempt.remaining, kAttemptCap);
          const milliseconds connect_timeout = std::min(timeout, kConnectCap);
          const Outcome outcome =
              transport_->perform(req, timeout, connect_timeout, nullptr);
          Verdict v = judge(req, outcome, mode, pass);
          // The server answered a write: the test hook can crash right
          // after, before gpunode learns the result (the rerun must
          // converge anyway). A dry run (plan) stored nothing: no point.
          if (v.response && req.method != "GET" &&
              req.target.find("dryRun=All") == std::string::npos)
            crash_point("api-write-done");
          if (v.response) {
            got.response = std::move(*v.response);
            return http::Step::done();
          }
          const auto* failure = std::get_if<TransportError>(&outcome);
          if (failure && ran_into_deadline(*failure, timeout, connect_timeout,
                                           attempt.remaining,
                                           clock_.steady_now(), deadline)) {
            return http::Step::fail(timeout_error(
                req.method, req.target,
                "timed out waiting for the API server (" +
                    std::to_string(attempt.number) +
                    (attempt.number == 1 ? " attempt)" : " attempts)")));
          }
          if (!v.retry)
            return http::Step::fail(
                note_attempts(std::move(v.error), attempt.number));
          return http::Step::retry(std::move(v.error), v.retry_after);
        });
    if (!done) return done.error();
    return got;
  }

  std::unique_ptr<Transport> transport_;
  Endpoint endpoint_;
  Clock& clock_;
  RetryPolicy retry_;
  std::function<double()> jitter_;
};

Result<void> HttpClient::watch(
    const std::string& collection_path, const std::string& field_selector,
    const std::function<WatchStep(const std::string&, const json&)>& on_event,
    SteadyTime deadline) {
  const std::string selector =
      field_selector.empty()
          ? ""
          : "fieldSelector=" + http::url_encode(field_selector);
  const std::string what =
      "watch " + path_only(collection_path) +
      (field_selector.empty() ? "" : " (" + field_selector + ")");
  auto timed_out = [&]() {
    return Error{
        ExitCode::kTimeout, "cluster", what + ": timed out waiting", {}};
  };

  std::string rv;
  bool need_list = true;
  int failures = 0;  // consecutive streams that failed or brought nothing
  for (;;) {
    if (stop_requested()) return interrupted_error("cluster");
    if (clock_.steady_now() >= deadline) return timed_out();
    if (need_list) {
      auto listed = list(with_query(collection_path, selector), deadline);
      if (!listed) {
        if (listed.error().exit == ExitCode::kTimeout) return timed_out();
        return listed.error();
      }
      // A list is an object; anything else (a bare number, an array) is
      // not an answer to build a watch on, and indexing it would throw.
      if (!listed->is_object()) {
        return Error{ExitCode::kBlocked, "cluster",
                     what + ": the API server's answer is not a list: " +
                         one_line(listed->dump(), 120),
                     "check that " + endpoint_.server + " (from " +
                         endpoint_.source + ") is a Kubernetes API server"};
      }
      rv = resource_version(*listed);
      const auto items = listed->find("items");
      if (items != listed->end() && items->is_array()) {
        for (const auto& item : *items) {
          if (on_event("ADDED", item) == WatchStep::kDone) return {};
        }
      }
      need_list = false;
      continue;  // re-check the deadline: delivering may have taken time
    }

    const auto remaining = std::chrono::duration_cast<milliseconds>(
        deadline - clock_.steady_now());
    // Rounded up: rounded down, a 5 s wait took a 4 s stream and then a
    // 1 s one (the real tier's audit log). The client ends the stream at
    // the deadline anyway.
    const long server_seconds =
        std::clamp<long>(static_cast<long>((remaining.count() + 999) / 1000), 1,
                         kMaxWatchSeconds);
    std::string query = "watch=1&allowWatchBookmarks=true&timeoutSeconds=" +
                        std::to_string(server_seconds);
    // Without a resourceVersion the server would replay every object as
    // ADDED; with one, it sends only what changed since the list.
    if (!rv.empty()) query += "&resourceVersion=" + http::url_encode(rv);
    if (!selector.empty()) query += "&" + selector;
    HttpRequest req = request("GET", with_query(collection_path, query));

    // The stream: newline-delimited JSON events, split here because a
    // chunk may end mid-line.
    std::string pending;
    int lines = 0;
    bool done = false;
    bool gone = false;
    std::optional<Error> stream_error;
    bool stream_error_retryable = false;
    auto on_line = [&](const std::string& line) -> bool {
      if (line.find_first_not_of(" \r\t") == std::string::npos) return true;
      ++lines;
      json event = json::parse(line, nullptr, false);
      if (event.is_discarded() || !event.is_object() ||
          !event["type"].is_string()) {
        stream_error = Error{ExitCode::kBlocked,
                             "cluster",
                             what +
                                 ": the API server sent a watch event that "
                                 "is not JSON: " +
                                 one_line(line, 120),
                             {}};
        stream_error_retryable = true;
        return false;
      }
      const std::string type = event["type"].get<std::string>();
      const json& object = event["object"];
      if (type == "ERROR") {
        const int code = int_field(object, "code");
        if (code == 410) {  // our resourceVersion is too old: list again
          gone = true;
          return false;
        }
        stream_error = http_error("GET", req.target, code ? code : 500,
                                  object.dump(), endpoint_);
        stream_error_retryable = code == 0 || is_retryable_status(code);
        return false;
      }
      const std::string new_rv = resource_version(object);
      if (!new_rv.empty()) rv = new_rv;
      if (type == "BOOKMARK") return true;  // only a resourceVersion
      if (on_event(type, object) == WatchStep::kDone) {
        done = true;
        return false;
      }
      return true;
    };
    const OnData on_data = [&](std::string_view chunk) -> bool {
      pending.append(chunk.data(), chunk.size());
      std::size_t start = 0;
      for (std::size_t nl;
           (nl = pending.find('\n', start)) != std::string::npos;
           start = nl + 1) {
        if (!on_line(pending.substr(start, nl - start))) {
          pending.clear();
          return false;
        }
      }
      pending.erase(0, start);
      return true;
    };

    const milliseconds connect_timeout = std::min(remaining, kConnectCap);
    const Outcome outcome =
        transport_->perform(req, remaining, connect_timeout, on_data);
    if (done) return {};
    if (gone) {
      need_list = true;
      failures = 0;
      continue;
    }

    Verdict v;
    if (stream_error) {
      v.error = *stream_error;
      v.retry = stream_error_retryable;
    } else if (const auto* failure = std::get_if<TransportError>(&outcome)) {
      if (ran_into_deadline(*failure, remaining, connect_timeout, remaining,
                            clock_.steady_now(), deadline)) {
        return timed_out();
      }
      if (lines > 0 && failure->kind == Failure::kConnectionLost) {
        failures = 0;  // a stream that worked, then broke: just resume
        continue;
      }
      v = judge(req, outcome, RetryMode::kIdempotent, {});
    } else if (std::get<HttpResponse>(outcome).status == 410) {
      need_list = true;
      failures = 0;
      continue;
    } else {
      v = judge(req, outcome, RetryMode::kIdempotent, {});
      if (v.response) {
        // The stream ended cleanly (timeoutSeconds, or the server closed
        // it): resume from the last resourceVersion. Only a stream that
        // brought nothing counts towards backing off, so a server that
        // closes every watch at once is not hammered.
        if (lines > 0) {
          failures = 0;
          continue;
        }
        v.retry = true;
        v.error = Error{ExitCode::kBlocked,
                        "cluster",
                        what + ": the API server ended the watch at once",
                        {}};
      }
    }
    if (!v.retry) return note_attempts(std::move(v.error), failures + 1);
    ++failures;
    auto delay = next_delay(v, failures, deadline);
    if (!delay) {
      // The stream ended at once every time until the deadline: that is
      // waiting that saw nothing, i.e. a timeout, not a broken server.
      if (!stream_error && std::holds_alternative<HttpResponse>(outcome)) {
        return timed_out();
      }
      return delay.error();
    }
    clock_.sleep_for(*delay);
  }
}

}  // namespace

std::unique_ptr<Client> make_client(std::unique_ptr<Transport> transport,
                                    Endpoint endpoint, Clock& clock,
                                    RetryPolicy retry,
                                    std::function<double()> jitter) {
  return std::make_unique<HttpClient>(std::move(transport), std::move(endpoint),
                                      clock, retry, std::move(jitter));
}

namespace {

// A kubelet refused another Node: the Node authorizer's answer to a read
// (plugin/pkg/auth/authorizer/node/node_authorizer.go, with
// AuthorizeNodeWithSelectors: "node 'A' cannot read 'B', only its own Node
// object"), or NodeRestriction's to a write
// (plugin/pkg/admission/noderestriction/admission.go admitNode: 'node "A"
// is not allowed to modify node "B"'). The run took this host for the wrong
// Node (a mistyped --node, say), and more rights are not the cure.
std::string kubelet_other_node_fix(const std::string& message) {
  static const std::regex read_refused(
      "node '([^']+)' cannot read '([^']+)', only its own Node object");
  static const std::regex write_refused(
      "node \"([^\"]+)\" is not allowed to modify node \"([^\"]+)\"");
  std::smatch m;
  if (!std::regex_search(message, m, read_refused) &&
      !std::regex_search(message, m, write_refused))
    return "";
  return "this host's kubelet is the Node " + m[1].str() +
         ", and a kubelet may read and change only its own Node: the run took "
         "this "
         "host for " +
         m[2].str() +
         " (--node, else node-name in /etc/rancher/k3s/config.yaml, else "
         "the host name); rerun with --node " +
         m[1].str() + " or without --node";
}

}  // namespace

Error http_error(const std::string& verb, const std::string& path,
                 int http_status, const std::string& body,
                 const Endpoint& endpoint) {
  const std::string where = verb + " " + path_only(path) + ": ";
  std::string message;
  std::string reason = reason_phrase(http_status);
  std::string causes;
  const json status = json::parse(body, nullptr, false);
  if (status.is_object() && string_field(status, "kind") == "Status") {
    message = string_field(status, "message");
    if (!string_field(status, "reason").empty()) {
      reason = string_field(status, "reason");
    }
    const auto details = status.find("details");
    if (details != status.end() && details->is_object()) {
      const auto list = details->find("causes");
      if (list != details->end() && list->is_array()) {
        for (const auto& cause : *list) {
          const std::string field = string_field(cause, "field");
          const std::string text = string_field(cause, "message");
          if (field.empty() && text.empty()) continue;
          causes += (causes.empty() ? "" : "; ") +
                    (field.empty() ? text : field + ": " + text);
        }
      }
    }
  } else {
    message = one_line(body, 200);
  }
  if (message.empty()) message = "(no message)";
  const std::string code =
      "(" + std::to_string(http_status) + " " + reason + ")";

  Error e{ExitCode::kBlocked, "cluster", {}, {}, http_status};
  if (http_status == 401) {
    e.message = where + "the API server refused the credentials in " +
                endpoint.source + ": " + message + " " + code;
    e.fix = "the client certificate or token in " + endpoint.source +
            " is not (or no longer) valid for this cluster: use the "
            "cluster's current /etc/rancher/k3s/k3s.yaml";
    return e;
  }
  if (http_status == 403) {
    e.message = where + "the credentials in " + endpoint.source +
                " were refused for this request: " + message + " " + code;
    e.fix = kubelet_other_node_fix(message);
    if (e.fix.empty())
      e.fix =
          "use the cluster admin's kubeconfig (/etc/rancher/k3s/k3s.yaml) "
          "or grant this user the needed RBAC rights";
    return e;
  }
  e.message = where + message + " " + code;
  if (!causes.empty() && (http_status == 422 || http_status == 400)) {
    e.message += "; causes: " + causes;
  }
  return e;
}

Error transport_error(const std::string& verb, const std::string& path,
                      const TransportError& failure, const Endpoint& endpoint) {
  const std::string where = verb + " " + path_only(path) + ": ";
  const std::string detail =
      failure.detail.empty() ? "" : " (" + one_line(failure.detail, 200) + ")";
  Error e{ExitCode::kBlocked, "cluster", {}, {}, 0};
  switch (failure.kind) {
    case Failure::kRefused:
      e.message = where + "cannot connect to the API server at " +
                  endpoint.server + detail;
      e.fix =
          "is k3s running? sudo systemctl status k3s (and sudo "
          "journalctl -u k3s); check server: in " +
          endpoint.source;
      break;
    case Failure::kResolve:
      e.message = where + "cannot resolve the API server's host in " +
                  endpoint.server + detail;
      e.fix = "check server: in " + endpoint.source;
      break;
    case Failure::kConnectTimeout:
      e.message = where + "no answer from the API server at " +
                  endpoint.server + " (connect timed out)";
      e.fix =
          "check that k3s is running (sudo systemctl status k3s) and "
          "that nothing (a firewall) blocks " +
          endpoint.server;
      break;
    case Failure::kTimeout:
      e.exit = ExitCode::kTimeout;
      e.message = where + "the API server at " + endpoint.server +
                  " did not answer in time" + detail;
      e.fix = "check the API server (sudo systemctl status k3s)";
      break;
    case Failure::kTlsVerify:
      e.message = where +
                  "the API server's certificate is not signed by the "
                  "CA in " +
                  endpoint.source + detail;
      e.fix =
          "the kubeconfig belongs to another cluster or k3s's CA changed: "
          "use this node's current /etc/rancher/k3s/k3s.yaml";
      break;
    case Failure::kTlsHostname:
      e.message = where + "the API server's certificate is not valid for " +
                  endpoint.server + detail;
      e.fix =
          "use the address k3s's certificate names (127.0.0.1 on the "
          "server itself), or add it with k3s's --tls-san and restart k3s";
      break;
    case Failure::kTlsHandshake:
      e.message = where + "the TLS handshake with " + endpoint.server +
                  " failed" + detail;
      e.fix = "check that server: in " + endpoint.source +
              " is the k3s API server (https, port 6443) and that the client "
              "certificate belongs to this cluster";
      break;
    case Failure::kLocalCert:
      e.exit = ExitCode::kUsage;
      e.message = where + "the certificates in " + endpoint.source +
                  " cannot be used" + detail;
      e.fix = "use the kubeconfig k3s writes (/etc/rancher/k3s/k3s.yaml)";
      break;
    case Failure::kConnectionLost:
      e.message =
          where + "the connection to " + endpoint.server + " broke" + detail;
      e.fix = "check that k3s is not restarting: sudo systemctl status k3s";
      break;
    case Failure::kTooLarge:  // the detail says how large
    case Failure::kOther:
      e.message = where + "request to " + endpoint.server + " failed" + detail;
      break;
  }
  return e;
}

}  // namespace gpunode::kube::detail
