// Registry pulls for `bundle create --pull`
// (include/gpunode/registry_pull.hpp).
//
// Every byte fetched is hashed while it streams to disk and checked against
// the digest that named it before it can reach the archive: a registry (or a
// proxy, or a cache) that serves damaged content is refused, never bundled.
// Work happens in a temporary directory next to out_path, so a failed pull
// leaves nothing behind and the final rename stays on one file system.
#include "gpunode/registry_pull.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "gpunode/images_lock.hpp"

namespace gpunode::bundle {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kLayer = "registry";
constexpr std::size_t kMaxManifestBytes = 4 * 1024 * 1024;
constexpr int kAttempts = 4;  // per request, on connection errors and 5xx

const char* const kIndexTypes[] = {
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json"};
constexpr const char* kAccept =
    "Accept: application/vnd.oci.image.index.v1+json, "
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

// RAII for the C handles used here.
struct CurlFree {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};
struct ArchiveFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};
using Curl = std::unique_ptr<CURL, CurlFree>;
using Slist = std::unique_ptr<curl_slist, SlistFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Removes the work directory unless released (the tar was renamed out).
class WorkDir {
 public:
  explicit WorkDir(std::string path) : path_(std::move(path)) {}
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string to_hex(const unsigned char* md, unsigned len) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

std::string sha256_of(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return "sha256:" + to_hex(md, len);
}

// Only sha256 digests of the right shape: they become file names below.
bool valid_digest(const std::string& d) {
  if (d.size() != 71 || d.compare(0, 7, "sha256:") != 0) return false;
  return std::all_of(d.begin() + 7, d.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

bool is_index_type(const std::string& t) {
  return std::find(std::begin(kIndexTypes), std::end(kIndexTypes), t) !=
         std::end(kIndexTypes);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(c));
  return s;
}

// One HTTP response as the header callback saw it. Redirects produce several
// header blocks; each status line starts a new one, so only the last (the
// one whose body arrives) is kept.
struct Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;  // error bodies and manifests (capped)
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* r = static_cast<Response*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
    line.pop_back();
  if (line.compare(0, 5, "HTTP/") == 0) {
    r->headers.clear();
    const auto sp = line.find(' ');
    r->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
  } else if (auto colon = line.find(':'); colon != std::string::npos) {
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    r->headers[lower(line.substr(0, colon))] = value;
  }
  return size * n;
}

// Where a body goes: into memory (manifests, tokens, errors) or into a file
// that is hashed as it is written (blobs).
struct Sink {
  Response* response = nullptr;
  int fd = -1;  // blob file; -1 = memory
  EVP_MD_CTX* md = nullptr;
  std::uint64_t written = 0;  // bytes in the file so far (across resumes)
  std::uint64_t limit = 0;    // the most the body may hold
  bool resuming = false;      // asked for a Range starting at `written`
  bool too_big = false;
  bool io_failed = false;
  int io_errno = 0;
};

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t bytes = size * n;
  const long st = s->response->status;
  // Error bodies (and anything before the final status) go to memory, a
  // little of them, for the message.
  if (s->fd < 0 || (st != 200 && st != 206)) {
    std::string& b = s->response->body;
    const std::size_t cap =
        s->fd < 0 ? static_cast<std::size_t>(s->limit) : 64 * 1024;
    if (b.size() + bytes > cap) {
      if (s->fd < 0) {
        s->too_big = true;
        return 0;  // aborts the transfer
      }
      return bytes;  // an error page: keep its start only
    }
    b.append(data, bytes);
    return bytes;
  }
  if (s->resuming && st == 200) {
    // The server ignored the Range and sends the whole blob: start the
    // file and its hash over rather than append a second copy.
    if (::ftruncate(s->fd, 0) != 0 || ::lseek(s->fd, 0, SEEK_SET) != 0) {
      s->io_failed = true;
      s->io_errno = errno;
      return 0;
    }
    EVP_DigestInit_ex(s->md, EVP_sha256(), nullptr);
    s->written = 0;
  }
  s->resuming = false;
  if (s->written + bytes > s->limit) {
    s->too_big = true;
    return 0;
  }
  const char* p = data;
  size_t left = bytes;
  while (left > 0) {
    const ssize_t w = ::write(s->fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      s->io_failed = true;
      s->io_errno = errno;
      return 0;
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  EVP_DigestUpdate(s->md, data, bytes);
  s->written += bytes;
  return bytes;
}

// "Bearer realm="https://x/token",service="x",scope="repository:a:pull""
std::map<std::string, std::string> parse_challenge(const std::string& h) {
  std::map<std::string, std::string> out;
  if (lower(h.substr(0, 7)) != "bearer ") return out;
  std::size_t i = 7;
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
    out[key] = value;
  }
  return out;
}

class Client {
 public:
  Client(const PullOptions& o, ParsedRef ref)
      : options_(o),
        ref_(std::move(ref)),
        deadline_(std::chrono::steady_clock::now() + o.timeout) {
    base_ = std::string(o.insecure_http ? "http://" : "https://") +
            ref_.registry + "/v2/" + ref_.repository;
  }

  // GET of a manifest into memory; `digest` is what we asked for.
  Result<Response> manifest(const std::string& reference) {
    Response r;
    Sink sink;
    sink.response = &r;
    sink.limit = kMaxManifestBytes;
    auto got = get(base_ + "/manifests/" + reference, kAccept, sink, nullptr,
                   "manifest " + reference);
    if (!got) return got.error();
    return r;
  }

  // Streams the blob into `path`, checking size and SHA-256. A transfer cut
  // short resumes from where it stopped (HTTP Range) when the server
  // honours ranges; otherwise the file starts over.
  Result<void> blob(const std::string& digest, std::uint64_t size,
                    const std::string& path, const std::string& what) {
    const int raw =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (raw < 0)
      return blocked("cannot create " + path + ": " + std::strerror(errno));
    Fd fd(raw);
    MdCtx md(EVP_MD_CTX_new());
    if (!md || EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr) != 1)
      return blocked("SHA-256 is not available");
    Response r;
    Sink sink;
    sink.response = &r;
    sink.fd = fd.fd;
    sink.md = md.get();
    sink.limit = size;
    auto got = get(base_ + "/blobs/" + digest, nullptr, sink, &md,
                   what + " " + digest);
    if (!got) return got.error();
    if (sink.written != size)
      return integrity(what + " " + digest + ": the registry sent " +
                       std::to_string(sink.written) +
                       " bytes, its descriptor says " + std::to_string(size));
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    EVP_DigestFinal_ex(md.get(), out, &len);
    const std::string actual = "sha256:" + to_hex(out, len);
    if (actual != digest)
      return integrity(what + " " + digest +
                       " is damaged: its content hashes to " + actual);
    if (::fsync(fd.fd) != 0)
      return blocked("cannot write " + path + ": " + std::strerror(errno));
    return {};
  }

 private:
  // One GET with auth, retries, backoff and (for file sinks) resume.
  Result<void> get(const std::string& url, const char* accept, Sink& sink,
                   MdCtx* md, const std::string& what) {
    bool tried_token = false;
    std::string last;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      if (attempt > 0) {
        // Backoff: 0.5 s, 1 s, 2 s; never past the deadline.
        std::this_thread::sleep_for(std::chrono::milliseconds(250 << attempt));
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline_ - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return Error{ExitCode::kTimeout,
                     kLayer,
                     "pulling " + options_.ref + " took longer than " +
                         std::to_string(options_.timeout.count()) + " s (at " +
                         what + ")",
                     {}};
      Curl curl(curl_easy_init());
      if (!curl) return blocked("libcurl could not start");
      CURL* c = curl.get();
      curl_slist* raw_headers = nullptr;
      if (accept) raw_headers = curl_slist_append(raw_headers, accept);
      if (!token_.empty())
        raw_headers = curl_slist_append(
            raw_headers, ("Authorization: Bearer " + token_).c_str());
      // Resume: keep what a cut transfer already wrote and hashed.
      const bool resume = sink.fd >= 0 && sink.written > 0;
      const std::string range =
          "Range: bytes=" + std::to_string(sink.written) + "-";
      if (resume) raw_headers = curl_slist_append(raw_headers, range.c_str());
      Slist headers(raw_headers);
      sink.response->status = 0;
      sink.response->headers.clear();
      sink.response->body.clear();
      sink.too_big = false;
      sink.resuming = resume;
      configure(c, url, headers.get(), sink, left);
      const CURLcode rc = curl_easy_perform(c);
      const long status = sink.response->status;
      if (sink.io_failed)
        return blocked(std::string("cannot write ") + what + ": " +
                       std::strerror(sink.io_errno));
      if (sink.too_big)
        return sink.fd >= 0
                   ? integrity(what +
                               ": the registry sent more bytes than "
                               "its descriptor says (" +
                               std::to_string(sink.limit) + ")")
                   : blocked(what + ": larger than " +
                             std::to_string(kMaxManifestBytes) + " bytes");
      if (status == 401 && !tried_token) {
        tried_token = true;
        auto t = fetch_token(sink.response->headers["www-authenticate"]);
        if (!t) return t.error();
        --attempt;  // authenticating is not a failed attempt
        continue;
      }
      if (rc == CURLE_OK && (status == 200 || status == 206)) return {};
      if (rc == CURLE_SSL_CACERT || rc == CURLE_PEER_FAILED_VERIFICATION ||
          rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SSL_CACERT_BADFILE ||
          rc == CURLE_UNSUPPORTED_PROTOCOL) {
        // Not transient: retrying an untrusted certificate cannot help.
        return blocked(
            what + ": " + curl_easy_strerror(rc) + " (" + options_.ref + ")",
            rc == CURLE_UNSUPPORTED_PROTOCOL
                ? std::string()
                : "a private CA: pass it with --registry-ca FILE; a plain "
                  "HTTP registry: --insecure-registry");
      }
      if (rc != CURLE_OK) {
        last = curl_easy_strerror(rc);
        // A partial blob stays (and is resumed) if the server did 200/206.
        if (sink.fd >= 0 && status != 200 && status != 206) {
          if (auto r = restart(sink, md); !r) return r.error();
        }
        continue;
      }
      if (status >= 500 || status == 429) {
        last = "HTTP " + std::to_string(status);
        if (sink.fd >= 0 && sink.written > 0) {
          if (auto r = restart(sink, md); !r) return r.error();
        }
        continue;
      }
      // 4xx: final. The registry's error body says why (MANIFEST_UNKNOWN,
      // NAME_UNKNOWN, BLOB_UNKNOWN, DENIED).
      std::string detail;
      try {
        const json j = json::parse(sink.response->body);
        for (const auto& e : j.at("errors"))
          detail += (detail.empty() ? "" : "; ") +
                    e.value("code", std::string()) + ": " +
                    e.value("message", std::string());
      } catch (const std::exception&) {
      }
      return blocked(options_.ref + ": " + what +
                         ": the registry answered HTTP " +
                         std::to_string(status) +
                         (detail.empty() ? "" : " (" + detail + ")"),
                     status == 404 ? "check the repository and tag exist in "
                                     "the registry (or push it there)"
                                   : std::string(),
                     static_cast<int>(status));
    }
    return blocked(what + " from " + ref_.registry + " failed after " +
                       std::to_string(kAttempts) + " attempts: " + last,
                   options_.insecure_http
                       ? std::string()
                       : "is the registry plain HTTP? then pass "
                         "--insecure-registry");
  }

  // Empties the blob file and its hash so the next attempt starts at 0.
  Result<void> restart(Sink& sink, MdCtx* md) {
    if (::ftruncate(sink.fd, 0) != 0 || ::lseek(sink.fd, 0, SEEK_SET) != 0)
      return blocked(std::string("cannot rewind a blob file: ") +
                     std::strerror(errno));
    sink.written = 0;
    if (md) EVP_DigestInit_ex(md->get(), EVP_sha256(), nullptr);
    return {};
  }

  void configure(CURL* c, const std::string& url, curl_slist* headers,
                 Sink& sink, std::chrono::milliseconds left) {
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, sink.response);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    // Blobs are often a redirect to object storage; curl drops our
    // Authorization header when the redirect changes host, as it must.
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    // Plain HTTP only when asked; a redirect must never downgrade HTTPS.
    const char* protocols = options_.insecure_http ? "http,https" : "https";
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, protocols);
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, protocols);
    // TLS is always verified: the system CAs, or the given CA file.
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!options_.ca_file.empty())
      curl_easy_setopt(c, CURLOPT_CAINFO, options_.ca_file.c_str());
    curl_easy_setopt(
        c, CURLOPT_CONNECTTIMEOUT_MS,
        static_cast<long>(std::min<std::int64_t>(left.count(), 30000)));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(left.count()));
    // A stalled transfer (under 1 KiB/s for a minute) is a connection
    // error and retried, instead of hanging until the deadline.
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "gpunode/" GPUNODE_VERSION);
  }

  // Anonymous token for the challenge's scope (public registries: nvcr.io,
  // Docker Hub, ghcr.io all answer an unauthenticated pull with 401).
  Result<void> fetch_token(const std::string& challenge) {
    auto params = parse_challenge(challenge);
    if (params["realm"].empty())
      return blocked(options_.ref + ": the registry wants credentials (" +
                         (challenge.empty() ? "no challenge" : challenge) +
                         "); only anonymous pulls are supported",
                     {}, 401);
    Curl curl(curl_easy_init());
    if (!curl) return blocked("libcurl could not start");
    std::string url = params["realm"];
    char sep = url.find('?') == std::string::npos ? '?' : '&';
    for (const char* key : {"service", "scope"}) {
      if (params[key].empty()) continue;
      char* esc = curl_easy_escape(curl.get(), params[key].c_str(), 0);
      url += sep + std::string(key) + "=" + (esc ? esc : "");
      curl_free(esc);
      sep = '&';
    }
    Response r;
    Sink sink;
    sink.response = &r;
    sink.limit = 1024 * 1024;
    configure(curl.get(), url, nullptr, sink, std::chrono::milliseconds(60000));
    const CURLcode rc = curl_easy_perform(curl.get());
    if (rc != CURLE_OK || r.status != 200)
      return blocked(options_.ref + ": no anonymous token from " +
                         params["realm"] + ": " +
                         (rc != CURLE_OK ? curl_easy_strerror(rc)
                                         : "HTTP " + std::to_string(r.status)),
                     {}, static_cast<int>(r.status));
    try {
      const json j = json::parse(r.body);
      token_ = j.value("token", j.value("access_token", std::string()));
    } catch (const std::exception&) {
    }
    if (token_.empty())
      return blocked(options_.ref + ": the token service " + params["realm"] +
                     " sent no token");
    return {};
  }

  const PullOptions& options_;
  ParsedRef ref_;
  std::chrono::steady_clock::time_point deadline_;
  std::string base_;
  std::string token_;
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

Result<void> write_file(const std::string& path, const std::string& data) {
  const int raw =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (raw < 0)
    return blocked("cannot create " + path + ": " + std::strerror(errno));
  Fd fd(raw);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t w = ::write(fd.fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0)
      return blocked("cannot write " + path + ": " + std::strerror(errno));
    done += static_cast<std::size_t>(w);
  }
  return {};
}

// The OCI-layout tar: pax, entries sorted, owner 0, mtime 0, so the same
// pull gives the same bytes. `files` maps entry name -> file on disk.
Result<void> write_tar(const std::string& tar_path,
                       const std::map<std::string, std::string>& files) {
  std::unique_ptr<archive, ArchiveFree> a(archive_write_new());
  if (!a) return blocked("libarchive could not start");
  auto fail = [&](const std::string& what) {
    return blocked("cannot write " + tar_path + " (" + what +
                   "): " + archive_error_string(a.get()));
  };
  if (archive_write_set_format_pax_restricted(a.get()) != ARCHIVE_OK ||
      archive_write_open_filename(a.get(), tar_path.c_str()) != ARCHIVE_OK)
    return fail("open");
  std::vector<char> buf(1 << 20);
  // std::map iterates in byte order: the entries come out sorted.
  for (const auto& [name, src] : files) {
    const int raw = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
    if (raw < 0)
      return blocked("cannot read " + src + ": " + std::strerror(errno));
    Fd fd(raw);
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0)
      return blocked("cannot stat " + src + ": " + std::strerror(errno));
    std::unique_ptr<archive_entry, EntryFree> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_filetype(e.get(), AE_IFREG);
    archive_entry_set_perm(e.get(), 0644);
    archive_entry_set_size(e.get(), st.st_size);
    archive_entry_set_mtime(e.get(), 0, 0);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK) return fail(name);
    for (;;) {
      const ssize_t n = ::read(fd.fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return blocked("cannot read " + src + ": " + std::strerror(errno));
      if (n == 0) break;
      if (archive_write_data(a.get(), buf.data(), static_cast<size_t>(n)) != n)
        return fail(name);
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) return fail("close");
  // fsync before the rename: a crash must not leave a named, empty tar.
  const int raw = ::open(tar_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (raw >= 0) {
    Fd fd(raw);
    if (::fsync(fd.fd) != 0)
      return blocked("cannot fsync " + tar_path + ": " + std::strerror(errno));
  }
  return {};
}

}  // namespace

Result<ParsedRef> parse_image_ref(const std::string& ref) {
  auto bad = [&](const std::string& why) -> Error {
    return Error{ExitCode::kUsage, kLayer,
                 "--pull " + ref + ": not an image reference (" + why + ")",
                 "use REGISTRY/REPOSITORY:TAG, e.g. "
                 "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"};
  };
  if (ref.empty()) return bad("empty");
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

Result<std::string> pull_to_oci_archive(const PullOptions& options) {
  auto ref = parse_image_ref(options.ref);
  if (!ref) return ref.error();
  if (options.out_path.empty())
    return usage_error("pull: no output path for " + options.ref);
  if (options.platforms.empty())
    return usage_error("pull: no platforms asked for " + options.ref);

  // Work next to out_path: the rename at the end stays on one file system.
  std::string tmpl = options.out_path + ".pull-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    return blocked("cannot create a directory next to " + options.out_path +
                   ": " + std::strerror(errno));
  WorkDir work(buf.data());
  const std::string blob_dir = work.path() + "/blobs";
  if (::mkdir(blob_dir.c_str(), 0755) != 0)
    return blocked("cannot create " + blob_dir + ": " + std::strerror(errno));

  Client client(options, *ref);
  std::map<std::string, std::string> entries;  // tar entry -> file
  auto add_bytes = [&](const std::string& digest,
                       const std::string& data) -> Result<void> {
    const std::string hex = digest.substr(7);
    const std::string path = blob_dir + "/" + hex;
    if (auto r = write_file(path, data); !r) return r;
    entries["blobs/sha256/" + hex] = path;
    return {};
  };
  auto add_blob = [&](const Blob& b) -> Result<void> {
    const std::string name = "blobs/sha256/" + b.digest.substr(7);
    if (entries.count(name)) return {};  // shared by platforms: fetch once
    const std::string path = blob_dir + "/" + b.digest.substr(7);
    if (auto r = client.blob(b.digest, b.size, path, b.what); !r) return r;
    entries[name] = path;
    return {};
  };

  // The top manifest: its digest is the hash of the bytes served. A ref by
  // digest must match it; a registry's Docker-Content-Digest must too.
  auto top = client.manifest(ref->reference);
  if (!top) return top.error();
  const std::string top_digest = sha256_of(top->body);
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
  if (auto r = add_bytes(top_digest, top->body); !r) return r.error();

  if (is_index_type(top_type) || top_json->contains("manifests")) {
    // Keep the served index byte for byte (its digest is the image's
    // identity) and fetch only the asked-for platforms' manifests and blobs.
    std::set<std::string> found;
    const json manifests = top_json->value("manifests", json::array());
    for (const auto& d : manifests) {
      const json platform = d.value("platform", json());
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
      if (sha256_of(m->body) != digest)
        return integrity(what + " (" + digest +
                         ") is damaged: its content hashes to " +
                         sha256_of(m->body));
      auto mj = parse_json(m->body, what);
      if (!mj) return mj.error();
      if (auto r = add_bytes(digest, m->body); !r) return r.error();
      auto blobs = referenced_blobs(*mj, what);
      if (!blobs) return blobs.error();
      for (const auto& b : *blobs)
        if (auto r = add_blob(b); !r) return r.error();
      found.insert(match);
    }
    if (found.empty()) {
      std::string wanted, has;
      for (const auto& p : options.platforms)
        wanted += (wanted.empty() ? "" : ", ") + p;
      for (const auto& d : manifests) {
        const json p = d.value("platform", json());
        if (p.is_object())
          has += (has.empty() ? "" : ", ") + p.value("os", std::string()) +
                 "/" + p.value("architecture", std::string());
      }
      return Error{ExitCode::kUsage, kLayer,
                   options.ref + " has no image for " + wanted +
                       " (it has: " + (has.empty() ? "none" : has) + ")",
                   "choose --platform from those it has"};
    }
  } else {
    // A single-platform manifest: whatever it is, it is the image.
    auto blobs = referenced_blobs(*top_json, "the manifest of " + options.ref);
    if (!blobs) return blobs.error();
    for (const auto& b : *blobs)
      if (auto r = add_blob(b); !r) return r.error();
  }

  // index.json names the image (not the registry it came through).
  const json index = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.oci.image.index.v1+json"},
      {"manifests",
       json::array(
           {{{"mediaType", top_type},
             {"digest", top_digest},
             {"size", top->body.size()},
             {"annotations",
              {{"org.opencontainers.image.ref.name",
                options.name_as.empty() ? options.ref : options.name_as}}}}})}};
  const std::string index_path = work.path() + "/index.json";
  const std::string layout_path = work.path() + "/oci-layout";
  if (auto r = write_file(index_path, index.dump()); !r) return r.error();
  if (auto r = write_file(layout_path, "{\"imageLayoutVersion\":\"1.0.0\"}");
      !r)
    return r.error();
  entries["index.json"] = index_path;
  entries["oci-layout"] = layout_path;

  const std::string tar = work.path() + "/image.tar";
  if (auto r = write_tar(tar, entries); !r) return r.error();
  if (::rename(tar.c_str(), options.out_path.c_str()) != 0)
    return blocked("cannot rename " + tar + " to " + options.out_path + ": " +
                   std::strerror(errno));
  return top_digest;
}

}  // namespace gpunode::bundle
