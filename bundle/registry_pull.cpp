// Registry pulls for `bundle create --pull`
// (bundle/include/gpunode/registry_pull.hpp).
//
// One pass over the bytes: manifests are fetched into memory first, then
// the tar is written in its final (sorted) order with every blob streamed
// from the registry straight into its entry, hashed on the way and checked
// against the digest that named it. A registry (or proxy, or cache) that
// serves damaged content fails the pull, and the temporary tar next to
// out_path is removed, so nothing damaged is ever named or bundled.
#include "gpunode/registry_pull.hpp"

#include <curl/curl.h>  // the CURLcodes that are not worth a retry
#include <fcntl.h>
#include <openssl/crypto.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <variant>

#include "gpunode/archive_handles.hpp"
#include "gpunode/base64.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/http.hpp"
#include "gpunode/http_curl.hpp"
#include "gpunode/images_lock.hpp"
#include "gpunode/progress_piece.hpp"
#include "gpunode/system_host.hpp"
#include "gpunode/unique_fd.hpp"

namespace gpunode::bundle {
namespace {

using nlohmann::json;

constexpr const char* kLayer = "registry";
constexpr std::size_t kMaxManifestBytes = 4 * 1024 * 1024;
constexpr int kAttempts = 4;  // per request, on connection errors and 5xx

const char* const kIndexTypes[] = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json"};
constexpr const char* kAccept =
    "application/vnd.oci.image.index.v1+json, "
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json";

Error blocked(const std::string& message, const std::string& fix = {},
              int status = 0) {
  return Error{ExitCode::kBlocked, kLayer, message, fix, status};
}
Error integrity(const std::string& message) {
  return Error{ExitCode::kIntegrity, kLayer, message, {}};
}

// Removes the temporary tar unless released (it was renamed to out_path).
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

// Where a blob's bytes go: returns 0, or the errno of a failed write.
using BlobOut = std::function<int(const char*, std::size_t)>;

// Only sha256 digests of the right shape: they become file names below.
bool valid_digest(const std::string& d) {
  if (d.size() != 71 || d.compare(0, 7, "sha256:") != 0) return false;
  return std::all_of(d.begin() + 7, d.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

// "host:port" of "scheme://host:port/path" (no userinfo in the URLs
// libcurl reports).
std::string url_authority(const std::string& url) {
  const auto start = url.find("://");
  const std::size_t from = start == std::string::npos ? 0 : start + 3;
  return url.substr(from, url.find('/', from) - from);
}

// Where the userinfo of a ref ends: its last '@' that does not start the
// digest at the end (REPOSITORY@sha256:<hex>, no '/' after it); npos when
// there is none. The password may hold '/' and '@' too, so the last such
// '@' ends it.
std::size_t userinfo_end(const std::string& ref) {
  const auto last = ref.rfind('@');
  if (last == std::string::npos) return last;
  const bool digest = ref.find('/', last) == std::string::npos &&
                      valid_digest(ref.substr(last + 1));
  if (!digest) return last;
  return last == 0 ? std::string::npos : ref.rfind('@', last - 1);
}

constexpr const char* kCredentialsFix =
    "put credentials in a registry auth file (podman login --authfile FILE "
    "HOST) and pass --registry-auth FILE";

bool is_index_type(const std::string& t) {
  return std::find(std::begin(kIndexTypes), std::end(kIndexTypes), t) !=
         std::end(kIndexTypes);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(c));
  return s;
}

// Where a blob's body goes: out through a BlobOut, hashed as it goes, across
// the resumed transfers of one blob.
struct Sink {
  const BlobOut* out = nullptr;
  Sha256* sha = nullptr;
  std::uint64_t written = 0;  // bytes sent out so far (across resumes)
  std::uint64_t limit = 0;    // the most the body may hold
  bool resuming = false;      // asked for a Range starting at `written`
  std::uint64_t skip = 0;     // bytes of this body already sent out
  bool too_big = false;
  bool io_failed = false;
  int io_errno = 0;
};

// One chunk of a 200 or 206 answer's body; false stops the transfer.
bool to_blob(Sink& s, int status, std::string_view chunk) {
  if (s.resuming && status == 200) {
    // The server ignored the Range and sends the whole blob again: drop
    // the part already sent out (the bytes went into the tar and cannot be
    // taken back). If the content changed meanwhile, the digest check at
    // the end catches it.
    s.skip = s.written;
  }
  s.resuming = false;
  const char* p = chunk.data();
  size_t left = chunk.size();
  if (s.skip > 0) {
    const auto drop =
        static_cast<size_t>(std::min<std::uint64_t>(s.skip, left));
    s.skip -= drop;
    p += drop;
    left -= drop;
  }
  if (s.written + left > s.limit) {
    s.too_big = true;
    return false;
  }
  if (left == 0) return true;
  if (const int err = (*s.out)(p, left); err != 0) {
    s.io_failed = true;
    s.io_errno = err;
    return false;
  }
  s.sha->update(p, left);
  s.written += left;
  return true;
}

// A WWW-Authenticate challenge (RFC 7235): the scheme, then its
// parameters, e.g. Bearer realm="https://x/token",service="x",
// scope="repository:a:pull" (Docker's token auth spec) or Basic
// realm="Registry Realm" (distribution's htpasswd auth).
struct Challenge {
  std::string scheme;  // lower case: "bearer", "basic"
  std::map<std::string, std::string> params;
};

Challenge parse_challenge(const std::string& h) {
  Challenge out;
  const auto space = h.find(' ');
  out.scheme = lower(h.substr(0, space));
  std::size_t i = space == std::string::npos ? h.size() : space + 1;
  while (i < h.size()) {
    while (i < h.size() && (h[i] == ' ' || h[i] == ',')) ++i;
    const auto eq = h.find('=', i);
    if (eq == std::string::npos) break;
    const std::string key = lower(h.substr(i, eq - i));
    std::string value;
    i = eq + 1;
    if (i < h.size() && h[i] == '"') {
      const auto end = h.find('"', i + 1);
      value = h.substr(
          i + 1, end == std::string::npos ? std::string::npos : end - i - 1);
      i = end == std::string::npos ? h.size() : end + 1;
    } else {
      const auto end = h.find(',', i);
      value =
          h.substr(i, end == std::string::npos ? std::string::npos : end - i);
      i = end == std::string::npos ? h.size() : end;
    }
    out.params[key] = value;
  }
  return out;
}

// The registry's HTTP side over the shared stack (gpunode/http.hpp): TLS
// verified against the system CAs or --registry-ca, retries with backoff
// and Retry-After within the pull's deadline, Ctrl-C checks. What is the
// registry's own stays here: the token challenge, resuming a blob (Range,
// 206) and the error bodies (distribution's errors[]).
class Client {
 public:
  Client(const PullOptions& o, ParsedRef ref,
         std::unique_ptr<http::Transport> transport, Clock& clock)
      : options_(o),
        ref_(std::move(ref)),
        transport_(std::move(transport)),
        clock_(clock),
        deadline_(clock.steady_now() + o.timeout) {
    base_ = std::string(o.insecure_http ? "http://" : "https://") +
            ref_.registry + "/v2/" + ref_.repository;
  }
  ~Client() { OPENSSL_cleanse(authorization_.data(), authorization_.size()); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // GET of a manifest into memory.
  Result<http::HttpResponse> manifest(const std::string& reference) {
    Sink sink;
    sink.limit = kMaxManifestBytes;
    return get(base_ + "/manifests/" + reference, kAccept, sink,
               "manifest " + reference);
  }

  // Streams the blob out through `out`, checking size and SHA-256. A
  // transfer cut short resumes where it stopped (HTTP Range); a server that
  // ignores ranges resends from 0 and the part already sent is skipped.
  Result<void> blob(const std::string& digest, std::uint64_t size,
                    const BlobOut& out, const std::string& what) {
    Sha256 sha;
    if (!sha.ok()) return blocked("SHA-256 is not available");
    Sink sink;
    sink.out = &out;
    sink.sha = &sha;
    sink.limit = size;
    auto got = get(base_ + "/blobs/" + digest, "", sink, what + " " + digest);
    if (!got) return got.error();
    if (sink.written != size)
      return integrity(what + " " + digest + ": the registry sent " +
                       std::to_string(sink.written) +
                       " bytes, its descriptor says " + std::to_string(size));
    const std::string actual = "sha256:" + sha.hex();
    if (actual != digest)
      return integrity(what + " " + digest +
                       " is damaged: its content hashes to " + actual);
    return {};
  }

 private:
  Error timed_out(const std::string& what) const {
    return Error{ExitCode::kTimeout,
                 kLayer,
                 "pulling " + options_.ref + " took longer than " +
                     std::to_string(options_.timeout.count()) + " s (at " +
                     what + ")",
                 {}};
  }

  // One GET with auth, retries and (for blob sinks) resume. What a cut
  // transfer already sent out is kept: the next attempt asks for the rest.
  Result<http::HttpResponse> get(const std::string& url, const char* accept,
                                 Sink& sink, const std::string& what) {
    bool tried_auth = false;
    std::string last;
    http::HttpResponse got;
    http::RetryPlan plan;
    // Backoff 0.5 s, 1 s, 2 s: the whole window, no jitter (one client).
    plan.policy.first_backoff = std::chrono::milliseconds(500);
    plan.policy.max_backoff = std::chrono::milliseconds(2000);
    plan.jitter = [] { return 1.0; };
    plan.max_attempts = kAttempts;
    plan.deadline = deadline_;
    plan.retry_until = deadline_;
    plan.layer = kLayer;
    plan.on_deadline = [&](int) { return timed_out(what); };
    plan.on_give_up = [&](const http::Step&, int attempts) -> Error {
      if (attempts < kAttempts) return timed_out(what);  // no time for more
      return blocked(what + " from " + ref_.registry + " failed after " +
                         std::to_string(kAttempts) + " attempts: " + last,
                     options_.insecure_http
                         ? std::string()
                         : "is the registry plain HTTP? then pass "
                           "--insecure-registry");
    };
    auto done = http::retry(clock_, plan, [&](const http::Attempt& attempt) {
      http::HttpRequest req;
      req.target = url;
      req.accept = accept;
      // libcurl (>= 7.83) does not forward this header through a redirect
      // to another host, port or scheme (a blob served from object
      // storage): CURLOPT_HTTPHEADER, CURLOPT_UNRESTRICTED_AUTH.
      if (!authorization_.empty())
        req.headers.push_back("Authorization: " + authorization_);
      // Resume: keep what a cut transfer already wrote and hashed.
      const bool resume = sink.out && sink.written > 0;
      if (resume)
        req.headers.push_back("Range: bytes=" + std::to_string(sink.written) +
                              "-");
      int status = 0;
      req.on_status = [&](int s) { status = s; };
      // Manifests are capped; a blob's error page is kept only in part,
      // for the message.
      req.max_body =
          sink.out ? 64 * 1024 : static_cast<std::size_t>(sink.limit);
      req.truncate_body = sink.out != nullptr;
      sink.too_big = false;
      sink.resuming = resume;
      sink.skip = 0;
      const http::OnData blob_data = [&](std::string_view chunk) {
        if (status != 200 && status != 206) return true;  // not the blob
        return to_blob(sink, status, chunk);
      };
      const http::Outcome outcome = transport_->perform(
          req, attempt.remaining,
          std::min(attempt.remaining, std::chrono::milliseconds(30000)),
          sink.out ? blob_data : http::OnData());
      return judge(outcome, sink, tried_auth, last, got, what);
    });
    if (!done) return done.error();
    return got;
  }

  // One attempt's outcome as a step of the retry loop.
  http::Step judge(const http::Outcome& outcome, const Sink& sink,
                   bool& tried_auth, std::string& last, http::HttpResponse& got,
                   const std::string& what) {
    using http::Step;
    if (sink.io_failed)
      return Step::fail(blocked(std::string("cannot write ") + what + ": " +
                                std::strerror(sink.io_errno)));
    const auto* failure = std::get_if<http::TransportError>(&outcome);
    if (sink.too_big || (failure && failure->kind == http::Failure::kTooLarge))
      return Step::fail(
          sink.out ? integrity(what +
                               ": the registry sent more bytes than "
                               "its descriptor says (" +
                               std::to_string(sink.limit) + ")")
                   : blocked(what + ": larger than " +
                             std::to_string(kMaxManifestBytes) + " bytes"));
    if (failure) {
      const int rc = failure->curl_code;
      if (rc == CURLE_SSL_CACERT || rc == CURLE_PEER_FAILED_VERIFICATION ||
          rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SSL_CACERT_BADFILE ||
          rc == CURLE_UNSUPPORTED_PROTOCOL) {
        // Not transient: retrying an untrusted certificate cannot help.
        return Step::fail(blocked(
            what + ": " + failure->reason + " (" + options_.ref + ")",
            rc == CURLE_UNSUPPORTED_PROTOCOL
                ? std::string()
                : "a private CA: pass it with --registry-ca FILE; a plain "
                  "HTTP registry: --insecure-registry"));
      }
      last = failure->reason;
      return Step::retry(blocked(last));
    }
    const auto& response = std::get<http::HttpResponse>(outcome);
    const int status = response.status;
    if (status == 401 && !from_registry(response))
      return Step::fail(redirect_refused(response, what));
    if (status == 401) {
      // One answer to the challenge per request; a second 401 means what
      // we sent (or an anonymous token) is not enough.
      if (tried_auth) return Step::fail(not_allowed());
      tried_auth = true;
      const auto challenge = response.headers.find("www-authenticate");
      auto a = answer(challenge == response.headers.end() ? std::string()
                                                          : challenge->second);
      if (!a) return Step::fail(a.error());
      return Step::again();  // authenticating is not a failed attempt
    }
    if (status == 200 || status == 206) {
      got = response;
      return Step::done();
    }
    if (status >= 500 || status == 429) {
      last = "HTTP " + std::to_string(status);
      std::optional<std::chrono::milliseconds> after;
      if (response.retry_after) after = *response.retry_after;
      return Step::retry(blocked(last), after);
    }
    // 4xx: final. The registry's error body says why (MANIFEST_UNKNOWN,
    // NAME_UNKNOWN, BLOB_UNKNOWN, DENIED).
    std::string detail;
    try {
      const json j = json::parse(response.body);
      for (const auto& e : j.at("errors"))
        detail += (detail.empty() ? "" : "; ") +
                  e.value("code", std::string()) + ": " +
                  e.value("message", std::string());
    } catch (const std::exception&) {
    }
    return Step::fail(
        blocked(options_.ref + ": " + what + ": the registry answered HTTP " +
                    std::to_string(status) +
                    (detail.empty() ? "" : " (" + detail + ")"),
                status == 404 ? "check the repository and tag exist in "
                                "the registry (or push it there)"
                              : std::string(),
                status));
  }

  // Whether the answer came from the registry itself, not from a host a
  // redirect led to (a blob served from object storage).
  bool from_registry(const http::HttpResponse& response) const {
    return response.final_url.empty() ||
           url_authority(response.final_url) == ref_.registry;
  }

  // A 401 from a redirect's target: no credentials of ours went there
  // (libcurl drops Authorization across hosts), so it refused on its own.
  Error redirect_refused(const http::HttpResponse& response,
                         const std::string& what) const {
    const std::string host = url_authority(response.final_url);
    return blocked(options_.ref + ": " + what + ": " + ref_.registry +
                       " redirected it to " + host +
                       ", which answered 401; credentials are not forwarded "
                       "across hosts, so this is " +
                       host + "'s own refusal, not of yours",
                   "retry: a signed storage URL may have expired on the way; "
                   "if it persists, the registry's storage redirect is "
                   "misconfigured (tell its operator), or pull from a "
                   "mirror that serves blobs itself",
                   401);
  }

  // "USER@HOST", for messages: the user name may be shown, the password
  // never.
  std::string who() const {
    return options_.credentials->username + "@" + ref_.registry;
  }

  Error refused(const std::string& by) const {
    return blocked(options_.ref + ": " + by + " refused the credentials for " +
                       who() + " (from " + options_.credentials->source + ")",
                   "check the user name and password (or API key) in that "
                   "file",
                   401);
  }

  Error needs_credentials(const std::string& scheme) const {
    const std::string& helper = options_.no_credentials_note;
    if (!helper.empty())
      return blocked(options_.ref + ": " + ref_.registry +
                         " wants credentials (" + scheme + "): " + helper,
                     "write them into a file: podman login --authfile FILE " +
                         ref_.registry + ", then --registry-auth FILE",
                     401);
    return blocked(options_.ref + ": " + ref_.registry +
                       " wants credentials (" + scheme +
                       ") and none were given for it",
                   "pass --registry-auth FILE (containers-auth.json(5), as "
                   "written by podman login --authfile FILE " +
                       ref_.registry + ")",
                   401);
  }

  // A 401 after the challenge was answered.
  Error not_allowed() const {
    return options_.credentials ? refused("the registry")
                                : needs_credentials("a pull token");
  }

  // Answers a 401's challenge (OCI distribution spec, "Authentication";
  // Docker's token auth spec): Basic with the credentials, or a Bearer
  // token from the challenge's realm.
  Result<void> answer(const std::string& header) {
    const Challenge challenge = parse_challenge(header);
    if (challenge.scheme == "bearer") return fetch_token(challenge.params);
    if (challenge.scheme == "basic") {
      if (!options_.credentials) return needs_credentials("HTTP Basic");
      // base_ is https unless --insecure-registry: the one place the
      // registry's own Basic credentials may travel in the clear.
      authorization_ = basic();
      return {};
    }
    return blocked(options_.ref + ": the registry answered 401 with " +
                       (header.empty() ? std::string("no challenge")
                                       : "the challenge '" + header + "'") +
                       "; gpunode speaks Basic and Bearer (token) auth",
                   {}, 401);
  }

  std::string basic() const {
    return "Basic " + encode_base64(options_.credentials->username + ":" +
                                    options_.credentials->password);
  }

  // A token for the challenge's scope from its realm (Docker's token auth
  // spec: GET realm?service=..&scope=..), with the credentials as Basic
  // when there are any, anonymous otherwise (public images on nvcr.io,
  // Docker Hub, ghcr.io). The realm is verified TLS like the registry; it
  // gets credentials over plain HTTP only with --insecure-registry.
  Result<void> fetch_token(std::map<std::string, std::string> params) {
    const std::string realm = params["realm"];
    if (realm.empty())
      return blocked(options_.ref +
                         ": the registry's Bearer challenge names no realm "
                         "(token service)",
                     {}, 401);
    const bool https = lower(realm.substr(0, 8)) == "https://";
    if (!https &&
        !(options_.insecure_http && lower(realm.substr(0, 7)) == "http://"))
      return blocked(options_.ref + ": the token service " + realm +
                         " is not HTTPS; gpunode sends nothing there "
                         "unless --insecure-registry is given",
                     {}, 401);
    http::HttpRequest req;
    req.target = realm;
    req.accept.clear();
    req.max_body = 1024 * 1024;
    char sep = req.target.find('?') == std::string::npos ? '?' : '&';
    for (const char* key : {"service", "scope"}) {
      if (params[key].empty()) continue;
      req.target +=
          sep + std::string(key) + "=" + http::url_encode(params[key]);
      sep = '&';
    }
    if (options_.credentials)
      req.headers.push_back("Authorization: " + basic());
    const http::Outcome outcome =
        transport_->perform(req, std::chrono::milliseconds(60000),
                            std::chrono::milliseconds(30000), nullptr);
    const auto* failure = std::get_if<http::TransportError>(&outcome);
    const int status =
        failure ? 0 : std::get<http::HttpResponse>(outcome).status;
    if ((status == 401 || status == 403) && options_.credentials)
      return refused("the token service " + realm);
    if (status == 401 || status == 403) return needs_credentials("Bearer");
    if (failure || status != 200)
      return blocked(
          options_.ref + ": no token from " + realm + ": " +
              (failure ? failure->reason : "HTTP " + std::to_string(status)),
          {}, status);
    std::string token;
    try {
      const json j = json::parse(std::get<http::HttpResponse>(outcome).body);
      token = j.value("token", j.value("access_token", std::string()));
    } catch (const std::exception&) {
    }
    if (token.empty())
      return blocked(options_.ref + ": the token service " + realm +
                     " sent no token");
    authorization_ = "Bearer " + token;
    return {};
  }

  const PullOptions& options_;
  ParsedRef ref_;
  std::unique_ptr<http::Transport> transport_;
  Clock& clock_;
  http::SteadyTime deadline_;
  std::string base_;
  std::string authorization_;  // the Authorization header's value, if any
};

// "linux/arm64" matches a descriptor platform {os, architecture[, variant]};
// a request without a variant takes any (arm64 images say v8 or nothing).
bool platform_matches(const std::string& wanted, const json& p) {
  if (!p.is_object()) return false;
  std::string have = p.value("os", std::string()) + "/" +
                     p.value("architecture", std::string());
  if (wanted == have) return true;
  const std::string variant = p.value("variant", std::string());
  return !variant.empty() && wanted == have + "/" + variant;
}

struct Blob {
  std::string digest;
  std::uint64_t size = 0;
  std::string what;
};

Result<json> parse_json(const std::string& body, const std::string& what) {
  try {
    return json::parse(body);
  } catch (const std::exception& e) {
    return blocked(what + " is not JSON: " + e.what());
  }
}

// The descriptors a manifest references (config, then layers).
Result<std::vector<Blob>> referenced_blobs(const json& m,
                                           const std::string& what) {
  std::vector<Blob> out;
  try {
    const json& cfg = m.at("config");
    out.push_back({cfg.at("digest").get<std::string>(),
                   cfg.at("size").get<std::uint64_t>(), "config of " + what});
    for (const auto& l : m.at("layers"))
      out.push_back({l.at("digest").get<std::string>(),
                     l.at("size").get<std::uint64_t>(), "layer of " + what});
  } catch (const std::exception& e) {
    return blocked(what + " is not an image manifest: " + e.what());
  }
  for (const auto& b : out)
    if (!valid_digest(b.digest))
      return blocked(what + " names a blob '" + b.digest +
                     "' that is not a sha256 digest");
  return out;
}

// The OCI-layout tar, written in one pass: pax, entries in byte order,
// owner 0, mtime 0, so the same pull gives the same bytes. Every byte that
// reaches the file is also shown to `observe` (the bundle hashes it there,
// so the finished tar is never read back).
class TarWriter {
 public:
  TarWriter(std::string path, int fd,
            std::function<void(const char*, std::size_t)> observe)
      : path_(std::move(path)), fd_(fd), observe_(std::move(observe)) {}

  Result<void> open() {
    if (!a_) return blocked("libarchive could not start");
    if (archive_write_set_format_pax_restricted(a_.get()) != ARCHIVE_OK ||
        archive_write_open(a_.get(), this, nullptr, &TarWriter::on_write,
                           nullptr) != ARCHIVE_OK)
      return fail("open");
    return {};
  }

  Result<void> begin(const std::string& name, std::uint64_t size) {
    ArchiveEntryPtr e(archive_entry_new());
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
    archive_entry_set_mtime(e.get(), 0, 0);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    if (archive_write_header(a_.get(), e.get()) != ARCHIVE_OK)
      return fail(name);
    return {};
  }

  // 0, or the errno of the failed write (EIO when libarchive failed alone).
  int data(const char* p, std::size_t n) {
    const la_ssize_t w = archive_write_data(a_.get(), p, n);
    if (w == static_cast<la_ssize_t>(n)) return 0;
    return errno_ != 0 ? errno_ : EIO;
  }

  Result<void> close() {
    if (archive_write_close(a_.get()) != ARCHIVE_OK) return fail("close");
    // fsync before the rename: a crash must not leave a named, empty tar.
    if (::fsync(fd_) != 0)
      return blocked("cannot fsync " + path_ + ": " + std::strerror(errno));
    return {};
  }

 private:
  static la_ssize_t on_write(archive*, void* self, const void* buf, size_t n) {
    auto* t = static_cast<TarWriter*>(self);
    const char* p = static_cast<const char*>(buf);
    size_t left = n;
    while (left > 0) {
      const ssize_t w = ::write(t->fd_, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        t->errno_ = errno;
        return -1;
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    if (t->observe_) t->observe_(static_cast<const char*>(buf), n);
    return static_cast<la_ssize_t>(n);
  }

  Error fail(const std::string& what) {
    const char* e = archive_error_string(a_.get());
    return blocked("cannot write " + path_ + " (" + what + "): " +
                   (errno_ != 0 ? std::strerror(errno_)
                    : e         ? e
                                : "?"));
  }

  std::string path_;
  int fd_;
  std::function<void(const char*, std::size_t)> observe_;
  ArchiveWritePtr a_{archive_write_new()};
  int errno_ = 0;
};

// A tar entry to be: bytes already in memory, or a blob still at the
// registry.
struct Entry {
  std::string bytes;
  std::optional<Blob> remote;
  std::uint64_t size() const { return remote ? remote->size : bytes.size(); }
};

}  // namespace

Result<ParsedRef> parse_image_ref(const std::string& ref) {
  auto bad = [&](const std::string& why) -> Error {
    return Error{ExitCode::kUsage, kLayer,
                 "--pull " + ref + ": not an image reference (" + why + ")",
                 "use REGISTRY/REPOSITORY:TAG, e.g. "
                 "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"};
  };
  if (ref.empty()) return bad("empty");
  // USER:PASSWORD@HOST...: curl would send it as Basic auth, and every
  // message, progress line and the process list would show the password.
  // An '@' may only start the digest at the end; the text before any other
  // '@' may be credentials and is never echoed, here or later (the ref is
  // refused before anything else prints it).
  if (const auto at = userinfo_end(ref); at != std::string::npos) {
    const std::string shown = "--pull ...@" + ref.substr(at + 1) + ": ";
    // A '/' after it: the '@' comes before the registry, so it is userinfo.
    // None: a digest gone wrong, or USER:PASSWORD@HOST[:PORT] with no
    // repository; both are possible, and both are answered.
    if (ref.find('/', at) != std::string::npos)
      return Error{ExitCode::kUsage, kLayer,
                   shown +
                       "the reference holds credentials before its registry "
                       "(USER:PASSWORD@HOST), which gpunode neither sends nor "
                       "prints",
                   kCredentialsFix};
    return Error{ExitCode::kUsage, kLayer,
                 shown +
                     "not an image reference: its '@' does not start a "
                     "digest (sha256:<64 hex>), and what comes before it is "
                     "not shown, since it may be credentials "
                     "(USER:PASSWORD@HOST), which gpunode neither sends nor "
                     "prints",
                 std::string("use REGISTRY/REPOSITORY:TAG or "
                             "REGISTRY/REPOSITORY@sha256:<64 hex>; ") +
                     kCredentialsFix};
  }
  for (char c : ref)
    if (c <= ' ' || c == '\\' || c == '?' || c == '#' || c == '%' ||
        static_cast<unsigned char>(c) >= 0x7f)
      return bad("it contains a space or a character not allowed in a ref");
  ParsedRef p;
  std::string rest = ref;
  const auto slash = rest.find('/');
  const std::string first = rest.substr(0, slash);
  // Like docker: the first component is a registry when it looks like a
  // host (a dot, a port, or localhost); otherwise Docker Hub.
  if (slash != std::string::npos &&
      (first.find('.') != std::string::npos ||
       first.find(':') != std::string::npos || first == "localhost")) {
    p.registry = first;
    rest = rest.substr(slash + 1);
  } else {
    p.registry = "registry-1.docker.io";
    if (rest.find('/') == std::string::npos) rest = "library/" + rest;
  }
  if (auto at = rest.find('@'); at != std::string::npos) {
    p.reference = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (!valid_digest(p.reference))
      return bad("the digest is not sha256:<hex>");
    // A tag next to the digest is informational; the digest decides.
    const auto colon = rest.rfind(':');
    if (colon != std::string::npos &&
        rest.find('/', colon) == std::string::npos)
      rest = rest.substr(0, colon);
  } else {
    const auto colon = rest.rfind(':');
    if (colon != std::string::npos &&
        rest.find('/', colon) == std::string::npos) {
      p.reference = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    } else {
      p.reference = "latest";
    }
  }
  if (rest.empty() || p.reference.empty()) return bad("no repository or tag");
  for (char c : rest)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '-' || c == '/'))
      return bad("repository names are lower case: a-z 0-9 . _ - /");
  if (rest.find("..") != std::string::npos || rest.front() == '/' ||
      rest.back() == '/')
    return bad("bad repository path");
  p.repository = rest;
  return p;
}

std::string archive_name_for(const std::string& ref) {
  auto wanted = parse_image_ref(ref);
  if (!wanted) return ref;
  for (const LockedImage* locked :
       {&locked_device_plugin_image(), &locked_cuda_sample_image()}) {
    auto l = parse_image_ref(locked->ref);
    if (l && l->repository == wanted->repository &&
        l->reference == wanted->reference)
      return locked->ref;
  }
  return ref;
}

Result<PulledImage> pull_to_oci_archive(const PullOptions& options) {
  auto ref = parse_image_ref(options.ref);
  if (!ref) return ref.error();
  if (options.out_path.empty())
    return usage_error("pull: no output path for " + options.ref);
  if (options.platforms.empty())
    return usage_error("pull: no platforms asked for " + options.ref);

  // The transport: TLS verified against the system CAs or --registry-ca;
  // redirects followed (blobs are often served from object storage), never
  // from HTTPS down to HTTP; a stall under 1 KiB/s for a minute is a
  // connection error and retried instead of waited out.
  http::CurlOptions transport_options;
  transport_options.ca_file = options.ca_file;
  transport_options.allow_plain_http = options.insecure_http;
  transport_options.follow_redirects = true;
  transport_options.low_speed_bytes = 1024;
  transport_options.low_speed_seconds = 60;
  transport_options.layer = kLayer;
  auto transport = http::make_curl_transport(std::move(transport_options));
  if (!transport) return transport.error();
  const std::unique_ptr<Clock> clock = make_system_clock();
  Client client(options, *ref, std::move(*transport), *clock);
  std::map<std::string, Entry> entries;  // tar entry name -> content
  auto add_bytes = [&](const std::string& digest, std::string data) {
    entries["blobs/sha256/" + digest.substr(7)].bytes = std::move(data);
  };
  // Blobs shared by platforms are listed (and fetched) once.
  auto add_blob = [&](const Blob& b) {
    Entry& e = entries["blobs/sha256/" + b.digest.substr(7)];
    if (!e.remote) e.remote = b;
  };
  PulledImage pulled;

  // --- Plan: every manifest into memory, every blob named. ---
  // The top manifest: its digest is the hash of the bytes served. A ref by
  // digest must match it; a registry's Docker-Content-Digest must too.
  auto top = client.manifest(ref->reference);
  if (!top) return top.error();
  const std::string top_digest = "sha256:" + sha256_hex(top->body);
  if (valid_digest(ref->reference) && top_digest != ref->reference)
    return integrity("manifest " + ref->reference + " of " + options.ref +
                     " is damaged: its content hashes to " + top_digest);
  if (auto h = top->headers.find("docker-content-digest");
      h != top->headers.end() && valid_digest(h->second) &&
      h->second != top_digest)
    return integrity("manifest of " + options.ref + ": the registry says " +
                     h->second + " but the content hashes to " + top_digest);
  auto top_json = parse_json(top->body, "the manifest of " + options.ref);
  if (!top_json) return top_json.error();
  std::string top_type = top_json->value("mediaType", std::string());
  if (top_type.empty()) {
    top_type = top->headers["content-type"];
    top_type = top_type.substr(0, top_type.find(';'));
  }
  const std::uint64_t top_size = top->body.size();
  add_bytes(top_digest, top->body);

  std::set<std::string> found;
  std::string has;  // the platforms the image offers, for the message
  if (is_index_type(top_type) || top_json->contains("manifests")) {
    // Keep the served index byte for byte (its digest is the image's
    // identity) and fetch only the asked-for platforms' manifests and blobs.
    const json manifests = top_json->value("manifests", json::array());
    for (const auto& d : manifests) {
      const json platform = d.value("platform", json());
      if (platform.is_object())
        has += (has.empty() ? "" : ", ") + platform.value("os", std::string()) +
               "/" + platform.value("architecture", std::string());
      std::string match;
      for (const auto& want : options.platforms)
        if (platform_matches(want, platform)) match = want;
      if (match.empty()) continue;
      const std::string digest = d.value("digest", std::string());
      if (!valid_digest(digest))
        return blocked("the index of " + options.ref +
                       " names a manifest that is not a sha256 digest");
      const std::string what = "the " + match + " manifest of " + options.ref;
      auto m = client.manifest(digest);
      if (!m) return m.error();
      if (const std::string got = "sha256:" + sha256_hex(m->body);
          got != digest)
        return integrity(what + " (" + digest +
                         ") is damaged: its content hashes to " + got);
      auto mj = parse_json(m->body, what);
      if (!mj) return mj.error();
      auto blobs = referenced_blobs(*mj, what);
      if (!blobs) return blobs.error();
      add_bytes(digest, std::move(m->body));
      for (const auto& b : *blobs) add_blob(b);
      found.insert(match);
    }
  } else {
    // A single-platform manifest: its config says which platform it is.
    // Configs are small; fetched into memory (and checked) here.
    auto blobs = referenced_blobs(*top_json, "the manifest of " + options.ref);
    if (!blobs) return blobs.error();
    const Blob& cfg = blobs->front();
    if (cfg.size > kMaxManifestBytes)
      return blocked(cfg.what + ": larger than " +
                     std::to_string(kMaxManifestBytes) + " bytes");
    std::string config;
    const BlobOut to_memory = [&](const char* p, std::size_t n) {
      config.append(p, n);
      return 0;
    };
    if (auto r = client.blob(cfg.digest, cfg.size, to_memory, cfg.what); !r)
      return r.error();
    auto cj = parse_json(config, cfg.what);
    if (!cj) return cj.error();
    has = cj->value("os", std::string()) + "/" +
          cj->value("architecture", std::string());
    for (const auto& want : options.platforms)
      if (platform_matches(want, *cj)) found.insert(want);
    add_bytes(cfg.digest, std::move(config));
    for (std::size_t i = 1; i < blobs->size(); ++i) add_blob((*blobs)[i]);
  }
  if (found.empty()) {
    std::string wanted;
    for (const auto& p : options.platforms)
      wanted += (wanted.empty() ? "" : ", ") + p;
    return Error{ExitCode::kUsage, kLayer,
                 options.ref + " has no image for " + wanted +
                     " (it has: " + (has.empty() ? "none" : has) + ")",
                 "choose --platform from those it has"};
  }

  // index.json names the image (not the registry it came through).
  const json index = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.oci.image.index.v1+json"},
      {"manifests",
       json::array(
           {{{"mediaType", top_type},
             {"digest", top_digest},
             {"size", top_size},
             {"annotations",
              {{"org.opencontainers.image.ref.name",
                options.name_as.empty() ? options.ref : options.name_as}}}}})}};
  entries["index.json"].bytes = index.dump();
  entries["oci-layout"].bytes = "{\"imageLayoutVersion\":\"1.0.0\"}";

  // --- Write: one pass, in the tar's final order. ---
  // A temporary file next to out_path: the rename stays on one file system.
  std::string tmpl = options.out_path + ".pull-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  const int raw = ::mkstemp(buf.data());
  if (raw < 0)
    return blocked("cannot create a file next to " + options.out_path + ": " +
                   std::strerror(errno));
  UniqueFd fd(raw);
  TempFile temp(buf.data());
  // mkstemp makes 0600; the tar is as readable as the rest of the bundle.
  if (::fchmod(fd.get(), 0644) != 0)
    return blocked("cannot set the mode of " + temp.path() + ": " +
                   std::strerror(errno));
  TarWriter tar(temp.path(), fd.get(), options.on_output);
  if (auto r = tar.open(); !r) return r.error();
  // The blobs' bytes as they stream in: what the pull waits for.
  std::uint64_t to_fetch = 0;
  for (const auto& [name, entry] : entries)
    if (entry.remote) to_fetch += entry.remote->size;
  ProgressPiece progress(*options.progress, "pull", options.ref, to_fetch);
  // std::map iterates in byte order: the entries come out sorted.
  for (const auto& [name, entry] : entries) {
    if (auto r = tar.begin(name, entry.size()); !r) return r.error();
    if (!entry.remote) {
      if (const int err = tar.data(entry.bytes.data(), entry.bytes.size());
          err != 0)
        return blocked("cannot write " + temp.path() + ": " +
                       std::strerror(err));
      continue;
    }
    const Blob& b = *entry.remote;
    const BlobOut to_tar = [&](const char* p, std::size_t n) {
      progress.add(n);
      return tar.data(p, n);
    };
    if (auto r = client.blob(b.digest, b.size, to_tar, b.what); !r)
      return r.error();
    pulled.blob_bytes += b.size;
  }
  if (auto r = tar.close(); !r) return r.error();
  if (::rename(temp.path().c_str(), options.out_path.c_str()) != 0)
    return blocked("cannot rename " + temp.path() + " to " + options.out_path +
                   ": " + std::strerror(errno));
  temp.release();
  progress.done();
  pulled.digest = top_digest;
  pulled.platforms.assign(found.begin(), found.end());
  return pulled;
}

}  // namespace gpunode::bundle
