// The Kubernetes client without a server: Status decoding, retry and
// backoff arithmetic against a scripted transport and a fake clock, watch
// bookkeeping, and the client-certificate validity check.
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <catch2/catch.hpp>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "gpunode/kube.hpp"
#include "kube/http.hpp"
#include "test_support.hpp"

using namespace gpunode;
using namespace gpunode::kube;
using namespace gpunode::kube::detail;
using gpunode::test::FakeClock;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

const Endpoint kEndpoint{"/etc/rancher/k3s/k3s.yaml", "https://127.0.0.1:6443"};

// One scripted answer: what perform() returns, the body chunks it streams
// to on_data first (for a 2xx), and how much fake time the transfer takes.
struct Step {
  Outcome outcome;
  std::vector<std::string> chunks;
  milliseconds takes{0};
};

struct Sent {
  HttpRequest request;
  milliseconds timeout;
  std::chrono::steady_clock::time_point at;
};

class ScriptedTransport : public Transport {
 public:
  ScriptedTransport(FakeClock& clock, std::deque<Step>& script,
                    std::vector<Sent>& sent)
      : clock_(clock), script_(script), sent_(sent) {}

  Outcome perform(const HttpRequest& request, milliseconds timeout,
                  milliseconds, const OnData& on_data) override {
    sent_.push_back({request, timeout, clock_.steady_now()});
    REQUIRE_FALSE(script_.empty());
    Step step = std::move(script_.front());
    script_.pop_front();
    clock_.advance(step.takes);
    if (auto* response = std::get_if<HttpResponse>(&step.outcome)) {
      if (on_data && response->status < 300) {
        for (const auto& chunk : step.chunks) {
          if (!on_data(chunk)) {
            response->stopped = true;
            break;
          }
        }
      }
    }
    return step.outcome;
  }

 private:
  FakeClock& clock_;
  std::deque<Step>& script_;
  std::vector<Sent>& sent_;
};

HttpResponse response(int status, const std::string& body,
                      std::optional<seconds> retry_after = std::nullopt) {
  HttpResponse r;
  r.status = status;
  r.body = body;
  r.retry_after = retry_after;
  return r;
}

Step ok(const json& body) { return {response(200, body.dump()), {}, {}}; }
Step status(int code, const std::string& reason, const std::string& message,
            std::optional<seconds> retry_after = std::nullopt) {
  const json s = {{"kind", "Status"},    {"apiVersion", "v1"},
                  {"status", "Failure"}, {"message", message},
                  {"reason", reason},    {"code", code}};
  return {response(code, s.dump(), retry_after), {}, {}};
}
Step refused() {
  return {
      TransportError{Failure::kRefused, "Couldn't connect to server"}, {}, {}};
}
Step stream(std::vector<std::string> chunks,
            milliseconds takes = milliseconds(0)) {
  return {response(200, ""), std::move(chunks), takes};
}

// A client over a script; jitter 0 makes every backoff the lower bound.
struct Harness {
  FakeClock clock;
  std::deque<Step> script;
  std::vector<Sent> sent;
  std::unique_ptr<Client> client = make_client(
      std::make_unique<ScriptedTransport>(clock, script, sent), kEndpoint,
      clock, RetryPolicy{milliseconds(200), milliseconds(5000)},
      [] { return 0.0; });
  std::chrono::steady_clock::time_point in(milliseconds d) {
    return clock.steady_now() + d;
  }
};

// --- certificates made here, with OpenSSL, for the validity check --------

struct Pair {
  std::string cert_pem;
  std::string key_pem;
};

std::string to_pem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return pem;
}

std::string key_to_pem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return pem;
}

// A self-signed certificate valid from `from` to `until`.
Pair make_cert(std::chrono::system_clock::time_point from,
               std::chrono::system_clock::time_point until) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  REQUIRE(key);
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 42);
  ASN1_TIME_set(X509_getm_notBefore(cert),
                std::chrono::system_clock::to_time_t(from));
  ASN1_TIME_set(X509_getm_notAfter(cert),
                std::chrono::system_clock::to_time_t(until));
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(
      name, "CN", MBSTRING_ASC,
      reinterpret_cast<const unsigned char*>("system:admin"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_set_pubkey(cert, key);
  REQUIRE(X509_sign(cert, key, EVP_sha256()) > 0);
  Pair p{to_pem(cert), key_to_pem(key)};
  X509_free(cert);
  EVP_PKEY_free(key);
  return p;
}

Kubeconfig config_with(const Pair& client, const Pair& ca) {
  Kubeconfig c;
  c.source = "/etc/rancher/k3s/k3s.yaml";
  c.context = "default";
  c.server = "https://127.0.0.1:6443";
  c.ca_pem = ca.cert_pem;
  c.client_cert_pem = client.cert_pem;
  c.client_key_pem = client.key_pem;
  return c;
}

}  // namespace

TEST_CASE("Status bodies become errors with verb, path, message, code",
          "[kube]") {
  SECTION("404") {
    const json s = {{"kind", "Status"},
                    {"status", "Failure"},
                    {"message", "nodes \"gpu-1\" not found"},
                    {"reason", "NotFound"},
                    {"code", 404}};
    Error e =
        http_error("GET", "/api/v1/nodes/gpu-1?x=1", 404, s.dump(), kEndpoint);
    CHECK(e.message ==
          "GET /api/v1/nodes/gpu-1: nodes \"gpu-1\" not found (404 NotFound)");
    CHECK(e.layer == "cluster");
    CHECK(e.status == 404);
    CHECK(e.exit == ExitCode::kBlocked);
  }
  SECTION("422 with causes") {
    const json s = {
        {"kind", "Status"},
        {"message",
         "RuntimeClass.node.k8s.io \"nvidia\" is invalid: handler: Invalid "
         "value: \"crun\": field is immutable"},
        {"reason", "Invalid"},
        {"details",
         {{"name", "nvidia"},
          {"kind", "RuntimeClass"},
          {"causes",
           {{{"reason", "FieldValueInvalid"},
             {"message", "Invalid value: \"crun\": field is immutable"},
             {"field", "handler"}}}}}},
        {"code", 422}};
    Error e = http_error("PATCH", "/apis/node.k8s.io/v1/runtimeclasses/nvidia",
                         422, s.dump(), kEndpoint);
    CHECK_THAT(e.message,
               Catch::StartsWith("PATCH /apis/node.k8s.io/v1/runtimeclasses/"
                                 "nvidia: RuntimeClass.node.k8s.io \"nvidia\" "
                                 "is invalid"));
    CHECK_THAT(e.message, Catch::Contains("(422 Invalid)"));
    CHECK_THAT(e.message,
               Catch::EndsWith("; causes: handler: Invalid value: \"crun\": "
                               "field is immutable"));
    CHECK(e.status == 422);
  }
  SECTION("401: the kubeconfig's credentials were refused") {
    Error e = http_error(
        "GET", "/api/v1/nodes", 401,
        R"({"kind":"Status","message":"Unauthorized","reason":"Unauthorized","code":401})",
        kEndpoint);
    CHECK_THAT(e.message,
               Catch::Contains("the API server refused the credentials in "
                               "/etc/rancher/k3s/k3s.yaml"));
    CHECK_THAT(e.message, Catch::Contains("(401 Unauthorized)"));
  }
  SECTION("403 names the kubeconfig too") {
    Error e = http_error(
        "DELETE", "/api/v1/namespaces/kube-system/pods/x", 403,
        R"({"kind":"Status","message":"pods \"x\" is forbidden: User \"bob\" cannot delete","reason":"Forbidden","code":403})",
        kEndpoint);
    CHECK_THAT(e.message, Catch::Contains("credentials in "
                                          "/etc/rancher/k3s/k3s.yaml were "
                                          "refused"));
    CHECK_THAT(e.message, Catch::Contains("User \"bob\" cannot delete"));
    CHECK(e.status == 403);
  }
  SECTION("a body that is not a Status (a proxy's page)") {
    Error e = http_error("GET", "/version", 502,
                         "<html>\n<body>Bad Gateway</body></html>", kEndpoint);
    CHECK(e.message ==
          "GET /version: <html> <body>Bad Gateway</body></html> (502 Bad "
          "Gateway)");
  }
}

TEST_CASE("transport failures get plain messages and fixes", "[kube]") {
  Error refused = transport_error(
      "GET", "/api/v1/nodes",
      TransportError{Failure::kRefused, "Couldn't connect to server"},
      kEndpoint);
  CHECK_THAT(refused.message,
             Catch::Contains("cannot connect to the API server at "
                             "https://127.0.0.1:6443"));
  CHECK_THAT(refused.fix, Catch::Contains("sudo systemctl status k3s"));
  Error ca =
      transport_error("GET", "/api/v1/nodes",
                      TransportError{Failure::kTlsVerify, ""}, kEndpoint);
  CHECK(ca.message ==
        "GET /api/v1/nodes: the API server's certificate is not signed by the "
        "CA in /etc/rancher/k3s/k3s.yaml");
}

TEST_CASE(
    "backoff grows exponentially, is capped, and jitters in its upper "
    "half",
    "[kube]") {
  const RetryPolicy p{milliseconds(200), milliseconds(5000)};
  CHECK(backoff_delay(p, 1, 0.0) == milliseconds(100));
  CHECK(backoff_delay(p, 1, 1.0) == milliseconds(200));
  CHECK(backoff_delay(p, 2, 0.0) == milliseconds(200));
  CHECK(backoff_delay(p, 3, 0.5) == milliseconds(600));   // window 800
  CHECK(backoff_delay(p, 6, 0.0) == milliseconds(2500));  // 6400 -> cap 5000
  CHECK(backoff_delay(p, 60, 0.999) <= milliseconds(5000));
  CHECK(backoff_delay(p, 60, 0.0) == milliseconds(2500));  // no overflow
}

TEST_CASE("Retry-After: delta seconds only", "[kube]") {
  CHECK(parse_retry_after("3") == seconds(3));
  CHECK(parse_retry_after(" 10\r\n") == seconds(10));
  CHECK_FALSE(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"));
  CHECK_FALSE(parse_retry_after(""));
  CHECK_FALSE(parse_retry_after("-1"));
}

TEST_CASE("5xx is retried with backoff through the clock", "[kube]") {
  Harness h;
  h.script = {status(503, "ServiceUnavailable", "etcd leader changed"),
              status(500, "InternalError", "boom"),
              ok({{"kind", "NodeList"}, {"items", json::array()}})};
  const auto start = h.clock.steady_now();
  auto r = h.client->list("/api/v1/nodes", h.in(seconds(10)));
  REQUIRE(r);
  REQUIRE(h.sent.size() == 3);
  CHECK(h.sent[1].at - start == milliseconds(100));
  CHECK(h.sent[2].at - start == milliseconds(300));
}

TEST_CASE("429 honours Retry-After", "[kube]") {
  Harness h;
  h.script = {status(429, "TooManyRequests", "slow down", seconds(2)),
              ok({{"kind", "Node"}})};
  const auto start = h.clock.steady_now();
  auto r = h.client->get("/api/v1/nodes/n", h.in(seconds(10)));
  REQUIRE(r);
  REQUIRE(h.sent.size() == 2);
  CHECK(h.sent[1].at - start == seconds(2));
}

TEST_CASE("a Retry-After past the deadline gives up at once, saying so",
          "[kube]") {
  Harness h;
  h.script = {status(429, "TooManyRequests", "slow down", seconds(30))};
  const auto start = h.clock.steady_now();
  auto r = h.client->get("/api/v1/nodes/n", h.in(seconds(5)));
  REQUIRE_FALSE(r);
  CHECK(h.clock.steady_now() == start);
  CHECK(r.error().status == 429);
  CHECK_THAT(r.error().message,
             Catch::Contains("slow down (429 TooManyRequests)"));
  CHECK_THAT(r.error().message, Catch::Contains("gave up after 1 attempt"));
  CHECK_THAT(r.error().message, Catch::Contains("past the deadline"));
}

TEST_CASE("refused connections are retried until the deadline, never past it",
          "[kube]") {
  Harness h;
  for (int i = 0; i < 50; ++i) h.script.push_back(refused());
  const auto deadline = h.in(seconds(3));
  auto r = h.client->list("/api/v1/nodes", deadline);
  REQUIRE_FALSE(r);
  CHECK(h.clock.steady_now() < deadline);
  const auto attempts = h.sent.size();
  CHECK(attempts >= 4);
  CHECK_THAT(r.error().message,
             Catch::Contains("cannot connect to the API server"));
  CHECK_THAT(r.error().message,
             Catch::Contains("gave up after " + std::to_string(attempts) +
                             " attempts"));
  CHECK_THAT(r.error().fix, Catch::Contains("systemctl status k3s"));
  // Every attempt's time limit stays inside the deadline.
  for (const auto& s : h.sent) CHECK(s.at + s.timeout <= deadline);
}

TEST_CASE("a deadline already passed is a timeout without a request",
          "[kube]") {
  Harness h;
  auto r = h.client->get("/api/v1/nodes/n", h.clock.steady_now());
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kTimeout);
  CHECK(h.sent.empty());
}

TEST_CASE("a connect cut short by the deadline is a timeout, not a fault",
          "[kube]") {
  Harness h;
  const auto deadline = h.in(milliseconds(300));
  h.script = {{TransportError{Failure::kConnectTimeout, "Connection timed out"},
               {},
               milliseconds(300)}};
  auto r = h.client->list("/api/v1/nodes", deadline);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kTimeout);
  CHECK(h.sent.at(0).timeout == milliseconds(300));
}

TEST_CASE("a connect that hit our own cap is retried", "[kube]") {
  Harness h;
  h.script = {{TransportError{Failure::kConnectTimeout, "Connection timed out"},
               {},
               seconds(10)},
              ok({{"kind", "NodeList"}})};
  auto r = h.client->list("/api/v1/nodes", h.in(seconds(60)));
  REQUIRE(r);
  CHECK(h.sent.size() == 2);
}

TEST_CASE("errors that retrying cannot fix are returned at once", "[kube]") {
  Harness h;
  h.script = {status(422, "Invalid", "handler: field is immutable")};
  auto r = h.client->apply("/apis/node.k8s.io/v1/runtimeclasses/nvidia",
                           {{"handler", "crun"}}, h.in(seconds(10)));
  REQUIRE_FALSE(r);
  CHECK(h.sent.size() == 1);
  CHECK(r.error().status == 422);
}

TEST_CASE("requests: get 404, apply, create, remove, text", "[kube]") {
  Harness h;
  const auto deadline = h.in(seconds(10));
  SECTION("get: 404 is no object, not an error") {
    h.script = {status(404, "NotFound", "not found")};
    auto r = h.client->get("/api/v1/nodes/x", deadline);
    REQUIRE(r);
    CHECK_FALSE(r->has_value());
  }
  SECTION("apply: server-side apply as gpunode, forced") {
    h.script = {ok({{"kind", "RuntimeClass"}})};
    auto r = h.client->apply("/apis/node.k8s.io/v1/runtimeclasses/nvidia",
                             {{"handler", "nvidia"}}, deadline);
    REQUIRE(r);
    const auto& req = h.sent.at(0).request;
    CHECK(req.method == "PATCH");
    CHECK(req.target ==
          "/apis/node.k8s.io/v1/runtimeclasses/"
          "nvidia?fieldManager=gpunode&force=true");
    CHECK(req.content_type == "application/apply-patch+yaml");
    CHECK(json::parse(req.body) == json{{"handler", "nvidia"}});
  }
  SECTION("create: 5xx is not retried (it may have landed)") {
    h.script = {status(503, "ServiceUnavailable", "busy")};
    auto r = h.client->create("/api/v1/namespaces/default/pods",
                              {{"metadata", {{"name", "smoke"}}}}, deadline);
    REQUIRE_FALSE(r);
    CHECK(h.sent.size() == 1);
  }
  SECTION("create: refused, retried, AlreadyExists: ours landed, fetch it") {
    h.script = {refused(),
                status(409, "AlreadyExists", "pods \"smoke\" already exists"),
                ok({{"metadata", {{"name", "smoke"}, {"uid", "u1"}}}})};
    auto r = h.client->create("/api/v1/namespaces/default/pods",
                              {{"metadata", {{"name", "smoke"}}}}, deadline);
    REQUIRE(r);
    CHECK((*r)["metadata"]["uid"] == "u1");
    REQUIRE(h.sent.size() == 3);
    CHECK(h.sent[2].request.method == "GET");
    CHECK(h.sent[2].request.target == "/api/v1/namespaces/default/pods/smoke");
  }
  SECTION("create: AlreadyExists on the first attempt is an error") {
    h.script = {status(409, "AlreadyExists", "pods \"smoke\" already exists")};
    auto r = h.client->create("/api/v1/namespaces/default/pods",
                              {{"metadata", {{"name", "smoke"}}}}, deadline);
    REQUIRE_FALSE(r);
    CHECK(r.error().status == 409);
  }
  SECTION("remove: 404 is false") {
    h.script = {status(404, "NotFound", "gone"), ok({{"kind", "Status"}})};
    auto gone = h.client->remove("/api/v1/namespaces/default/pods/x", deadline);
    REQUIRE(gone);
    CHECK_FALSE(*gone);
    auto removed =
        h.client->remove("/api/v1/namespaces/default/pods/x", deadline);
    REQUIRE(removed);
    CHECK(*removed);
    CHECK(h.sent[1].request.method == "DELETE");
  }
  SECTION("get_text: pod logs as text") {
    h.script = {{response(200, "CUDA ok\n"), {}, {}}};
    auto r =
        h.client->get_text("/api/v1/namespaces/default/pods/x/log", deadline);
    REQUIRE(r);
    CHECK(*r == "CUDA ok\n");
  }
}

TEST_CASE(
    "watch: list, then events from its resourceVersion, reconnects, "
    "410 relists",
    "[kube]") {
  Harness h;
  const json node_v5 = {
      {"metadata", {{"name", "n"}, {"resourceVersion", "5"}}}};
  auto event = [](const std::string& type, const std::string& rv, int gpus) {
    return json{{"type", type},
                {"object",
                 {{"metadata", {{"name", "n"}, {"resourceVersion", rv}}},
                  {"gpus", gpus}}}}
               .dump() +
           "\n";
  };
  const std::string e7 = event("MODIFIED", "7", 1);
  const std::string bookmark =
      json{{"type", "BOOKMARK"},
           {"object", {{"metadata", {{"resourceVersion", "9"}}}}}}
          .dump() +
      "\n";
  const std::string gone =
      json{{"type", "ERROR"},
           {"object",
            {{"kind", "Status"},
             {"code", 410},
             {"reason", "Expired"},
             {"message", "too old resource version: 9 (20)"}}}}
          .dump() +
      "\n";
  h.script = {
      ok({{"kind", "NodeList"},
          {"metadata", {{"resourceVersion", "6"}}},
          {"items", {node_v5}}}),
      // An event split across chunks, then a bookmark; the stream ends.
      stream({e7.substr(0, 10), e7.substr(10) + bookmark}, seconds(1)),
      // The resumed watch is told its resourceVersion expired.
      stream({gone}),
      ok({{"kind", "NodeList"},
          {"metadata", {{"resourceVersion", "21"}}},
          {"items", {node_v5}}}),
      stream({event("MODIFIED", "22", 4)}),
  };
  std::vector<std::string> seen;
  auto r = h.client->watch(
      "/api/v1/nodes", "metadata.name=n",
      [&](const std::string& type, const json& o) {
        seen.push_back(type + " " +
                       o["metadata"]["resourceVersion"].get<std::string>());
        return o.value("gpus", 0) == 4 ? WatchStep::kDone
                                       : WatchStep::kContinue;
      },
      h.in(seconds(60)));
  REQUIRE(r);
  CHECK(seen == std::vector<std::string>{"ADDED 5", "MODIFIED 7", "ADDED 5",
                                         "MODIFIED 22"});
  REQUIRE(h.sent.size() == 5);
  CHECK(h.sent[0].request.target ==
        "/api/v1/nodes?fieldSelector=metadata.name%3Dn");
  CHECK(h.sent[1].request.target ==
        "/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=60&"
        "resourceVersion=6&fieldSelector=metadata.name%3Dn");
  // Resumed from the bookmark's resourceVersion, with the time that is left.
  CHECK(h.sent[2].request.target ==
        "/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=59&"
        "resourceVersion=9&fieldSelector=metadata.name%3Dn");
  CHECK(h.sent[4].request.target ==
        "/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=59&"
        "resourceVersion=21&fieldSelector=metadata.name%3Dn");
}

TEST_CASE("watch: HTTP 410 on the watch request relists too", "[kube]") {
  Harness h;
  const json empty = {{"kind", "PodList"},
                      {"metadata", {{"resourceVersion", "3"}}},
                      {"items", json::array()}};
  h.script = {
      ok(empty), status(410, "Expired", "too old"), ok(empty),
      stream(
          {R"({"type":"ADDED","object":{"metadata":{"name":"p","resourceVersion":"4"}}})"
           "\n"})};
  int added = 0;
  auto r = h.client->watch(
      "/api/v1/namespaces/default/pods", "",
      [&](const std::string& type, const json&) {
        added += type == "ADDED";
        return WatchStep::kDone;
      },
      h.in(seconds(30)));
  REQUIRE(r);
  CHECK(added == 1);
  CHECK(h.sent.size() == 4);
}

TEST_CASE("watch: a list answer that is not an object is an error, not a throw",
          "[kube]") {
  // Found by test/fuzz/watch_events_fuzz: nlohmann stops parsing at a NUL,
  // so this body parses as the number 9, which used to be indexed as an
  // object ("items") and throw type_error.305 out of watch().
  const std::string fuzzed("9\0\0\0\xbf\xbf\xbf\xbf\xbf\xbf\xbf:\"D", 14);
  for (const std::string& body :
       {fuzzed, std::string("[]"), std::string("\"NodeList\"")}) {
    INFO(body);
    Harness h;
    h.script = {{response(200, body), {}, {}}};
    Result<void> r;
    REQUIRE_NOTHROW(r = h.client->watch(
                        "/api/v1/nodes", "metadata.name=n",
                        [](const std::string&, const json&) {
                          return WatchStep::kContinue;
                        },
                        h.in(seconds(30))));
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == ExitCode::kBlocked);
    CHECK_THAT(r.error().message,
               Catch::Contains("the API server's answer is not a list"));
    CHECK(h.sent.size() == 1);
  }
}

TEST_CASE("watch: the deadline ends it as a timeout", "[kube]") {
  Harness h;
  const auto deadline = h.in(seconds(10));
  h.script = {ok({{"kind", "NodeList"},
                  {"metadata", {{"resourceVersion", "1"}}},
                  {"items", json::array()}}),
              // The transfer's own time limit is the deadline.
              {TransportError{Failure::kTimeout, "Operation timed out"},
               {},
               seconds(10)}};
  auto r = h.client->watch(
      "/api/v1/nodes", "",
      [](const std::string&, const json&) { return WatchStep::kContinue; },
      deadline);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kTimeout);
  CHECK_THAT(r.error().message, Catch::Contains("timed out waiting"));
  CHECK(h.sent.at(1).timeout == seconds(10));
}

TEST_CASE(
    "watch: a server that closes every watch at once is backed off, "
    "then it is a timeout",
    "[kube]") {
  Harness h;
  h.script.push_back(ok({{"kind", "NodeList"},
                         {"metadata", {{"resourceVersion", "1"}}},
                         {"items", json::array()}}));
  for (int i = 0; i < 40; ++i) h.script.push_back(stream({}));
  auto r = h.client->watch(
      "/api/v1/nodes", "",
      [](const std::string&, const json&) { return WatchStep::kContinue; },
      h.in(seconds(5)));
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kTimeout);
  CHECK(h.sent.size() < 12);  // backed off, not a busy loop
}

TEST_CASE("an expired client certificate is refused before connecting",
          "[kube]") {
  FakeClock clock;  // 2026-11-18
  const auto now = clock.now();
  const auto day = std::chrono::hours(24);
  const Pair ca = make_cert(now - 365 * day, now + 3650 * day);

  SECTION("expired") {
    const Pair client = make_cert(now - 400 * day, now - 2 * day);
    auto c = Client::connect(config_with(client, ca), clock);
    REQUIRE_FALSE(c);
    CHECK(c.error().exit == ExitCode::kBlocked);
    const std::time_t t = std::chrono::system_clock::to_time_t(now - 2 * day);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", &tm);
    CHECK_THAT(c.error().message,
               Catch::Contains("the client certificate in "
                               "/etc/rancher/k3s/k3s.yaml expired on " +
                               std::string(date)));
    CHECK_THAT(c.error().fix, Catch::Contains("k3s certificate rotate"));
    CHECK_THAT(c.error().fix, Catch::Contains("systemctl restart k3s"));
  }
  SECTION("not yet valid: a clock problem") {
    const Pair client = make_cert(now + 2 * day, now + 400 * day);
    auto c = Client::connect(config_with(client, ca), clock);
    REQUIRE_FALSE(c);
    CHECK(c.error().exit == ExitCode::kBlocked);
    CHECK_THAT(c.error().message, Catch::Contains("is not valid before"));
    CHECK_THAT(c.error().fix, Catch::Contains("clock"));
  }
  SECTION("valid: connect succeeds without contacting anything") {
    const Pair client = make_cert(now - day, now + 364 * day);
    CHECK(Client::connect(config_with(client, ca), clock).ok());
  }
  SECTION("a key that belongs to another certificate") {
    Pair client = make_cert(now - day, now + 364 * day);
    client.key_pem = make_cert(now - day, now + day).key_pem;
    auto c = Client::connect(config_with(client, ca), clock);
    REQUIRE_FALSE(c);
    CHECK(c.error().exit == ExitCode::kUsage);
    CHECK_THAT(c.error().message,
               Catch::Contains("client key does not belong to the client "
                               "certificate"));
  }
  SECTION("a CA that only looks like PEM") {
    Kubeconfig config = config_with(make_cert(now - day, now + day), ca);
    config.ca_pem =
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END "
        "CERTIFICATE-----\n";
    auto c = Client::connect(config, clock);
    REQUIRE_FALSE(c);
    CHECK(c.error().exit == ExitCode::kUsage);
    CHECK_THAT(c.error().message, Catch::Contains("certificate authority"));
  }
}

TEST_CASE(
    "an API server that stays down is reported after the retry limit, not the "
    "deadline",
    "[kube]") {
  Harness h;
  for (int i = 0; i < 200; ++i) h.script.push_back(refused());
  const auto start = h.clock.steady_now();
  // The run's --timeout is 10 minutes; one request gives up after a minute.
  auto r = h.client->get("/apis/node.k8s.io/v1/runtimeclasses/nvidia",
                         h.in(std::chrono::minutes(10)));
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kBlocked);
  CHECK(h.clock.steady_now() - start <= seconds(60));
  CHECK(h.clock.steady_now() - start >= seconds(50));
  CHECK_THAT(r.error().message, Catch::Contains("retry limit"));
}
