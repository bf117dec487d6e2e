// Registry pulls against a scripted HTTP server on loopback, for what a real
// registry does not do on demand: ask for a bearer token, fail with 503,
// cut a blob off mid-transfer (resumed with Range). Also the ref parser.
#include "gpunode/registry_pull.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "gpunode/base64.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/image_archive.hpp"
#include "test_support.hpp"

using gpunode::bundle::parse_image_ref;
using gpunode::bundle::pull_to_oci_archive;
using gpunode::bundle::PullOptions;
using gpunode::test::TempDir;

namespace {

std::string sha256(const std::string& d) {
  return "sha256:" + gpunode::sha256_hex(d);
}

struct Request {
  std::string path;
  std::map<std::string, std::string> headers;  // lower-case names
};

// One connection per request (Connection: close); handler returns the raw
// response bytes to send.
class ScriptedServer {
 public:
  using Handler = std::function<std::string(const Request&)>;
  explicit ScriptedServer(Handler h) : handler_(std::move(h)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::vector<Request> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  void serve() {
    while (!stop_) {
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string in;
      char buf[4096];
      while (in.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      Request r;
      const auto sp1 = in.find(' ');
      const auto sp2 = in.find(' ', sp1 + 1);
      if (sp1 != std::string::npos && sp2 != std::string::npos)
        r.path = in.substr(sp1 + 1, sp2 - sp1 - 1);
      std::size_t pos = in.find("\r\n");
      while (pos != std::string::npos) {
        const auto end = in.find("\r\n", pos + 2);
        if (end == std::string::npos || end == pos + 2) break;
        const std::string line = in.substr(pos + 2, end - pos - 2);
        const auto colon = line.find(':');
        if (colon != std::string::npos) {
          std::string k = line.substr(0, colon);
          for (char& ch : k) ch = static_cast<char>(std::tolower(ch));
          r.headers[k] = line.substr(line.find_first_not_of(' ', colon + 1));
        }
        pos = end;
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        requests_.push_back(r);
      }
      const std::string out = handler_(r);
      std::size_t done = 0;
      while (done < out.size()) {
        const ssize_t n =
            ::send(c, out.data() + done, out.size() - done, MSG_NOSIGNAL);
        if (n <= 0) break;
        done += static_cast<std::size_t>(n);
      }
      ::close(c);
    }
  }

  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<Request> requests_;
};

std::string response(int status, const std::string& body,
                     const std::string& extra = {},
                     const std::string& type = "application/octet-stream") {
  return "HTTP/1.1 " + std::to_string(status) +
         " X\r\nConnection: close\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
         "\r\n" + body;
}

// The device plugin's tag from `server` (plain HTTP, a mirror of the locked
// ref) into `dir`/image.tar.
PullOptions plugin_pull(const ScriptedServer& server, const TempDir& dir) {
  PullOptions o;
  o.ref = server.host() + "/nvidia/k8s-device-plugin:v0.19.3";
  o.out_path = dir.path() + "/image.tar";
  o.insecure_http = true;
  o.name_as = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";
  return o;
}

// The registry's 401 for a request without the right token (Docker's token
// auth spec: the challenge names the token service and the scope).
std::string bearer_challenge(const std::string& realm) {
  return response(401, R"({"errors":[{"code":"UNAUTHORIZED"}]})",
                  "WWW-Authenticate: Bearer realm=\"" + realm +
                      "\",service=\"test\",scope=\"repository:nvidia/"
                      "k8s-device-plugin:pull\"\r\n",
                  "application/json");
}

// A single-platform image: config + one layer (any bytes: nothing here
// unpacks it).
struct TinyImage {
  std::string layer, layer_digest, config, config_digest, manifest;
};

TinyImage tiny_image(std::size_t layer_bytes) {
  TinyImage img;
  std::string& layer = img.layer;
  layer.assign(layer_bytes, '\0');
  for (std::size_t i = 0; i < layer.size(); ++i)
    layer[i] = static_cast<char>((i * 2654435761u) >> 13);
  img.layer_digest = sha256(layer);
  img.config =
      nlohmann::json{
          {"architecture", "amd64"},
          {"os", "linux"},
          {"rootfs",
           {{"type", "layers"},
            {"diff_ids", nlohmann::json::array({img.layer_digest})}}}}
          .dump();
  img.config_digest = sha256(img.config);
  img.manifest =
      nlohmann::json{
          {"schemaVersion", 2},
          {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
          {"config",
           {{"mediaType", "application/vnd.oci.image.config.v1+json"},
            {"digest", img.config_digest},
            {"size", img.config.size()}}},
          {"layers",
           nlohmann::json::array(
               {{{"mediaType", "application/vnd.oci.image.layer.v1.tar"},
                 {"digest", img.layer_digest},
                 {"size", layer.size()}}})}}
          .dump();
  return img;
}

}  // namespace

TEST_CASE("image refs are parsed like docker does", "[registry]") {
  auto p = parse_image_ref("nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  REQUIRE(p);
  CHECK(p->registry == "nvcr.io");
  CHECK(p->repository == "nvidia/k8s-device-plugin");
  CHECK(p->reference == "v0.19.3");
  p = parse_image_ref("127.0.0.1:5000/a/b");
  REQUIRE(p);
  CHECK(p->registry == "127.0.0.1:5000");
  CHECK(p->reference == "latest");
  p = parse_image_ref("busybox");
  REQUIRE(p);
  CHECK(p->registry == "registry-1.docker.io");
  CHECK(p->repository == "library/busybox");
  const std::string digest = "sha256:" + std::string(64, 'a');
  p = parse_image_ref("nvcr.io/x/y:tag@" + digest);
  REQUIRE(p);
  CHECK(p->reference == digest);
  CHECK(p->repository == "x/y");
  for (const char* bad : {"", "nvcr.io/Upper/x:1", "nvcr.io/x y:1",
                          "nvcr.io/x@sha256:short", "nvcr.io/../x:1"}) {
    INFO(bad);
    auto r = parse_image_ref(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == gpunode::ExitCode::kUsage);
  }
  CHECK(gpunode::bundle::archive_name_for(
            "mirror.example:5000/nvidia/k8s-device-plugin:v0.19.3") ==
        "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  CHECK(gpunode::bundle::archive_name_for("mirror.example/other:1") ==
        "mirror.example/other:1");
}

TEST_CASE(
    "a ref with USER:PASSWORD@ before its registry is refused without "
    "repeating the password",
    "[registry]") {
  for (const std::string ref :
       {"alice:s3cret@harbor.example.com/nvidia/k8s-device-plugin:v0.19.3",
        "alice:pa/ss@word@harbor.example.com/nvidia/k8s-device-plugin:v1",
        "$oauthtoken:KEY%23@nvcr.io/nvidia/k8s-device-plugin:v0.19.3"}) {
    INFO(ref);
    auto r = parse_image_ref(ref);
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == gpunode::ExitCode::kUsage);
    CHECK_THAT(r.error().message, Catch::Contains("holds credentials"));
    CHECK_THAT(r.error().fix, Catch::Contains("--registry-auth FILE"));
    for (const char* secret : {"s3cret", "pa/ss", "word@", "KEY"})
      CHECK(r.error().message.find(secret) == std::string::npos);
  }
  // A digest's '@' is not userinfo.
  CHECK(parse_image_ref("nvcr.io/x/y@sha256:" + std::string(64, 'b')));
}

TEST_CASE(
    "a ref that is only USER:PASSWORD@HOST (no repository), with a port or "
    "a digest, is refused without repeating the password",
    "[registry]") {
  const std::string digest = "sha256:" + std::string(64, 'b');
  for (const std::string& ref :
       std::vector<std::string>{"alice:s3cret@harbor.example.com",
                                "alice:s3cret@harbor.example.com:443",
                                "alice:pa/ss@word@harbor.example.com:443",
                                "alice:s3cret@harbor.example.com@" + digest,
                                "s3cret@harbor.example.com",
                                "alice:s3cret@nvcr.io/nvidia/x@" + digest}) {
    INFO(ref);
    auto r = parse_image_ref(ref);
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == gpunode::ExitCode::kUsage);
    CHECK_THAT(r.error().fix, Catch::Contains("--registry-auth FILE"));
    for (const char* secret : {"s3cret", "pa/ss", "word@"}) {
      CHECK(r.error().message.find(secret) == std::string::npos);
      CHECK(r.error().fix.find(secret) == std::string::npos);
    }
  }
  // The part after the last '@' is shown, so the operator sees which --pull.
  CHECK_THAT(
      parse_image_ref("alice:s3cret@harbor.example.com:443").error().message,
      Catch::StartsWith("--pull ...@harbor.example.com:443: "));
  // A digest that is not one: refused, and what precedes it is not shown.
  auto bad_digest = parse_image_ref("nvcr.io/x@sha256:short");
  REQUIRE_FALSE(bad_digest);
  CHECK_THAT(bad_digest.error().message,
             Catch::Contains("does not start a digest"));
}

TEST_CASE(
    "a pull gets a bearer token, retries a 503 and resumes a cut blob with "
    "Range",
    "[registry]") {
  const TinyImage img = tiny_image(300 * 1024);
  const std::string& layer = img.layer;
  const std::string& layer_digest = img.layer_digest;
  const std::string& config = img.config;
  const std::string& config_digest = img.config_digest;
  const std::string& manifest = img.manifest;

  const std::string server_mode = GENERATE(as<std::string>{}, "honours Range",
                                           "ignores Range", "changes content");
  INFO("the server " << server_mode);
  std::atomic<int> config_calls{0}, layer_calls{0};
  std::string realm;  // set once the port is known
  ScriptedServer server([&](const Request& r) -> std::string {
    if (r.path.rfind("/token", 0) == 0)
      return response(200, R"({"token":"t0k3n"})", {}, "application/json");
    auto auth = r.headers.find("authorization");
    if (auth == r.headers.end() || auth->second != "Bearer t0k3n")
      return bearer_challenge(realm);
    if (r.path == "/v2/nvidia/k8s-device-plugin/manifests/v0.19.3")
      return response(200, manifest,
                      "Docker-Content-Digest: " + sha256(manifest) + "\r\n",
                      "application/vnd.oci.image.manifest.v1+json");
    if (r.path == "/v2/nvidia/k8s-device-plugin/blobs/" + config_digest) {
      if (config_calls++ == 0) return response(503, "busy");
      return response(200, config);
    }
    if (r.path == "/v2/nvidia/k8s-device-plugin/blobs/" + layer_digest) {
      if (layer_calls++ == 0) {
        // Promise the whole blob, send half, hang up.
        std::string cut = response(200, layer);
        return cut.substr(0, cut.size() - layer.size() / 2);
      }
      auto range = r.headers.find("range");
      // A server (or proxy) may ignore Range and send it all again, or send
      // different bytes the second time (the blob changed under the tag).
      if (server_mode == "ignores Range") return response(200, layer);
      if (server_mode == "changes content") {
        std::string other = layer;
        other.back() ^= 1;
        return response(200, other);
      }
      if (range == r.headers.end()) return response(200, layer);
      const std::size_t from = std::stoul(range->second.substr(6));
      return response(206, layer.substr(from),
                      "Content-Range: bytes " + std::to_string(from) + "-" +
                          std::to_string(layer.size() - 1) + "/" +
                          std::to_string(layer.size()) + "\r\n");
    }
    return response(404, R"({"errors":[{"code":"NOT_FOUND"}]})");
  });
  realm = "http://" + server.host() + "/token";

  TempDir tmp;
  PullOptions o = plugin_pull(server, tmp);
  auto digest = pull_to_oci_archive(o);
  if (server_mode == "changes content") {
    // The first half went into the tar already; the whole pull fails and
    // leaves nothing, not a tar holding half of each version.
    REQUIRE_FALSE(digest);
    CHECK(digest.error().exit == gpunode::ExitCode::kIntegrity);
    CHECK_THAT(digest.error().message, Catch::Contains(layer_digest));
    CHECK(std::filesystem::is_empty(tmp.path()));
    return;
  }
  INFO((digest ? "" : digest.error().message));
  REQUIRE(digest);
  CHECK(digest->digest == sha256(manifest));
  CHECK(digest->platforms == std::vector<std::string>{"linux/amd64"});
  auto info =
      gpunode::verify_image_archive(o.out_path, o.name_as, "linux/amd64");
  INFO((info ? "" : info.error().message));
  CHECK(info);
  CHECK(config_calls == 2);  // 503, then ok
  CHECK(layer_calls == 2);   // cut, then resumed
  bool resumed = false;
  for (const auto& r : server.requests()) {
    auto range = r.headers.find("range");
    if (range != r.headers.end())
      resumed =
          range->second ==
          "bytes=" + std::to_string(layer.size() - layer.size() / 2) + "-";
  }
  CHECK(resumed);
}

TEST_CASE(
    "a registry's Retry-After is waited for, and one past the deadline ends "
    "the pull as a timeout at once",
    "[registry]") {
  using Clock = std::chrono::steady_clock;
  std::mutex mu;
  std::vector<Clock::time_point> at;
  std::string retry_after = "1";
  ScriptedServer server([&](const Request&) -> std::string {
    std::lock_guard<std::mutex> l(mu);
    at.push_back(Clock::now());
    if (at.size() == 1)
      return response(429, "slow down", "Retry-After: " + retry_after + "\r\n");
    return response(404, R"({"errors":[{"code":"MANIFEST_UNKNOWN"}]})");
  });
  TempDir tmp;
  PullOptions o;
  o.ref = server.host() + "/nvidia/k8s-device-plugin:v0.19.3";
  o.out_path = tmp.path() + "/image.tar";
  o.insecure_http = true;
  auto first = pull_to_oci_archive(o);
  REQUIRE_FALSE(first);
  CHECK_THAT(first.error().message, Catch::Contains("MANIFEST_UNKNOWN"));
  REQUIRE(at.size() == 2);
  // The server's 1 s, not the first backoff (0.5 s).
  CHECK(at[1] - at[0] >= std::chrono::milliseconds(1000));

  at.clear();
  retry_after = "3600";
  o.timeout = std::chrono::seconds(5);
  const auto start = Clock::now();
  auto second = pull_to_oci_archive(o);
  REQUIRE_FALSE(second);
  CHECK(second.error().exit == gpunode::ExitCode::kTimeout);
  CHECK_THAT(second.error().message, Catch::Contains("took longer than 5 s"));
  CHECK(at.size() == 1);
  CHECK(Clock::now() - start < std::chrono::seconds(2));
}

namespace {

// The registry's side of a pull whose blobs live elsewhere: the manifest,
// and each blob as a 307 to /cdn/<digest> on localhost (another host to
// libcurl than the 127.0.0.1 it asked); 404 for anything else.
std::string manifest_or_cdn_redirect(const TinyImage& img,
                                     const std::string& self,
                                     const Request& r) {
  if (r.path == "/v2/nvidia/k8s-device-plugin/manifests/v0.19.3")
    return response(200, img.manifest, {},
                    "application/vnd.oci.image.manifest.v1+json");
  const std::string blobs = "/v2/nvidia/k8s-device-plugin/blobs/";
  if (r.path.rfind(blobs, 0) == 0)
    return response(
        307, "",
        "Location: http://localhost:" + self.substr(self.find(':') + 1) +
            "/cdn/" + r.path.substr(blobs.size()) + "\r\n");
  return response(404, R"({"errors":[{"code":"NOT_FOUND"}]})");
}

gpunode::bundle::RegistryCredentials credentials(const std::string& user,
                                                 const std::string& password) {
  gpunode::bundle::RegistryCredentials c;
  c.username = user;
  c.password = password;
  c.source = "test.json";
  return c;
}

}  // namespace

TEST_CASE(
    "a blob redirected to another host that answers 401 is that host's "
    "refusal, not the user's credentials",
    "[registry][registry-auth]") {
  const TinyImage img = tiny_image(4096);
  std::string self;
  ScriptedServer server([&](const Request& r) -> std::string {
    if (r.path.rfind("/cdn/", 0) == 0)
      return response(401, "<Error><Code>AccessDenied</Code></Error>");
    return manifest_or_cdn_redirect(img, self, r);
  });
  self = server.host();
  TempDir tmp;
  PullOptions o = plugin_pull(server, tmp);
  o.credentials = credentials("alice", "s3cret");
  auto pulled = pull_to_oci_archive(o);
  REQUIRE_FALSE(pulled);
  const gpunode::Error& e = pulled.error();
  INFO(e.message);
  CHECK(e.exit == gpunode::ExitCode::kBlocked);
  CHECK_THAT(e.message,
             Catch::Contains(self + " redirected it to localhost:" +
                             self.substr(self.find(':') + 1) +
                             ", which answered 401; credentials are not "
                             "forwarded across hosts"));
  CHECK_THAT(e.message, !Catch::Contains("refused the credentials"));
  CHECK_THAT(e.fix, Catch::Contains("signed storage URL"));
  CHECK_THAT(e.message + e.fix, !Catch::Contains("s3cret"));
}

TEST_CASE(
    "credentials go to the token service as Basic, the registry sees only "
    "the token, and a blob redirected to another host gets no Authorization",
    "[registry][registry-auth]") {
  const TinyImage img = tiny_image(4096);
  const std::string basic =
      "Basic " + gpunode::encode_base64("$oauthtoken:k3y");
  std::string self;  // "127.0.0.1:PORT", once known
  ScriptedServer server([&](const Request& r) -> std::string {
    auto auth = r.headers.find("authorization");
    const std::string got = auth == r.headers.end() ? "" : auth->second;
    if (r.path.rfind("/token", 0) == 0)
      return got == basic ? response(200, R"({"access_token":"t0k3n"})", {},
                                     "application/json")
                          : response(401, R"({"details":"who are you"})");
    // Object storage under another host name: no auth needed there.
    if (r.path.rfind("/cdn/", 0) == 0) {
      const std::string digest = r.path.substr(5);
      return response(200,
                      digest == img.config_digest ? img.config : img.layer);
    }
    if (got != "Bearer t0k3n")
      return bearer_challenge("http://" + self + "/token");
    return manifest_or_cdn_redirect(img, self, r);
  });
  self = server.host();
  TempDir tmp;
  PullOptions o = plugin_pull(server, tmp);
  gpunode::bundle::RegistryCredentials c = credentials("$oauthtoken", "k3y");
  o.credentials = c;
  auto pulled = pull_to_oci_archive(o);
  INFO((pulled ? "" : pulled.error().message));
  REQUIRE(pulled);
  int token_requests = 0, cdn_requests = 0;
  for (const auto& r : server.requests()) {
    INFO(r.path);
    auto auth = r.headers.find("authorization");
    const std::string got = auth == r.headers.end() ? "" : auth->second;
    if (r.path.rfind("/token", 0) == 0) {
      ++token_requests;
      CHECK(got == basic);
    } else if (r.path.rfind("/cdn/", 0) == 0) {
      ++cdn_requests;
      CHECK(r.headers.at("host").rfind("localhost:", 0) == 0);
      CHECK(got.empty());  // neither the token nor the password
    } else {
      CHECK(got.find("Basic") == std::string::npos);
    }
  }
  CHECK(token_requests == 1);
  CHECK(cdn_requests == 2);  // config and layer

  // A wrong key: the token service says 401, the pull names user@host.
  c.password = "wrong";
  o.credentials = c;
  auto refused = pull_to_oci_archive(o);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().exit == gpunode::ExitCode::kBlocked);
  CHECK_THAT(refused.error().message,
             Catch::Contains("refused the credentials for $oauthtoken@" +
                             server.host()) &&
                 Catch::Contains("test.json") && !Catch::Contains("wrong"));
  // None at all: the anonymous token request is refused too.
  o.credentials.reset();
  auto anonymous = pull_to_oci_archive(o);
  REQUIRE_FALSE(anonymous);
  CHECK(anonymous.error().exit == gpunode::ExitCode::kBlocked);
  CHECK_THAT(anonymous.error().message,
             Catch::Contains("wants credentials") && Catch::Contains("Bearer"));
  CHECK_THAT(anonymous.error().fix, Catch::Contains("--registry-auth"));
}
