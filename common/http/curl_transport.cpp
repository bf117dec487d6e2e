// The libcurl transport (common/include/gpunode/http_curl.hpp). TLS is always
// verified (CURLOPT_SSL_VERIFYPEER/VERIFYHOST are never turned off); the CA
// and client key can come from memory (CURLOPT_*_BLOB, libcurl >= 7.77
// with OpenSSL), so key material is never written to a file.
#include <curl/curl.h>
#include <openssl/crypto.h>

#include <cctype>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gpunode/curl_handles.hpp"
#include "gpunode/http_curl.hpp"
#include "gpunode/interrupt.hpp"

namespace gpunode::http {
namespace {

bool contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// State of one transfer, shared with libcurl's callbacks.
struct Transfer {
  CURL* handle = nullptr;
  const HttpRequest* request = nullptr;
  const OnData* on_data = nullptr;
  HttpResponse response;
  bool too_big = false;
  std::exception_ptr thrown;  // from on_data; rethrown outside libcurl
};

int response_code(CURL* handle) {
  long code = 0;
  curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &code);
  return static_cast<int>(code);
}

// libcurl calls this with body data. Exceptions must not cross libcurl's C
// frames, so one from on_data is kept and rethrown after the transfer.
size_t on_write(char* ptr, size_t size, size_t count, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t n = size * count;
  if (t->on_data && *t->on_data) {
    const int code = response_code(t->handle);
    if (code >= 200 && code < 300) {
      try {
        if (!(*t->on_data)(std::string_view(ptr, n))) {
          t->response.stopped = true;
          return 0;  // CURLE_WRITE_ERROR, which perform() treats as done
        }
      } catch (...) {
        t->thrown = std::current_exception();
        return 0;
      }
      return n;
    }
  }
  if (t->response.body.size() + n > t->request->max_body) {
    if (t->request->truncate_body) return n;  // its start is kept
    t->too_big = true;
    return 0;
  }
  t->response.body.append(ptr, n);
  return n;
}

size_t on_header(char* ptr, size_t size, size_t count, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t n = size * count;
  std::string line(ptr, n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
    line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    // A new response (after a redirect or a 100): only the last counts.
    t->response.retry_after.reset();
    t->response.headers.clear();
    return n;
  }
  if (line.empty()) {  // the end of one response's headers
    if (t->request->on_status) t->request->on_status(response_code(t->handle));
    return n;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos) return n;
  std::string name = line.substr(0, colon);
  for (char& c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = line.substr(colon + 1);
  value.erase(0, value.find_first_not_of(" \t"));
  if (name == "retry-after") t->response.retry_after = parse_retry_after(value);
  t->response.headers[name] = std::move(value);
  return n;
}

int on_progress(void*, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return stop_requested() ? 1 : 0;
}

Failure classify(CURLcode rc, const std::string& detail, bool tls_connected) {
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
      return Failure::kRefused;
    case CURLE_COULDNT_RESOLVE_HOST:
      return Failure::kResolve;
    case CURLE_OPERATION_TIMEDOUT:
      return tls_connected ? Failure::kTimeout : Failure::kConnectTimeout;
    case CURLE_PEER_FAILED_VERIFICATION:
      // libcurl reports both an unknown issuer and a name mismatch here;
      // the fixes differ, so tell them apart by its message.
      if (contains(detail, "subject name") ||
          contains(detail, "does not match") ||
          contains(detail, "no alternative certificate")) {
        return Failure::kTlsHostname;
      }
      return Failure::kTlsVerify;
    case CURLE_SSL_CONNECT_ERROR:
      // A TLS alert or protocol mismatch is a real refusal; an EOF or
      // reset mid-handshake is a server going away (k3s restarting), and
      // nothing was sent yet, so it is worth retrying.
      if (contains(detail, "alert") || contains(detail, "wrong version") ||
          contains(detail, "certificate") || contains(detail, "protocol") ||
          contains(detail, "handshake failure")) {
        return Failure::kTlsHandshake;
      }
      return Failure::kRefused;
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
      return Failure::kLocalCert;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
      // With TLS 1.3 the server's verdict on our certificate arrives as
      // an alert on the first read, not in the handshake.
      if (contains(detail, "alert")) return Failure::kTlsHandshake;
      return Failure::kConnectionLost;
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return Failure::kConnectionLost;
    default:
      return Failure::kOther;
  }
}

class CurlTransport : public Transport {
 public:
  explicit CurlTransport(CurlOptions options) : options_(std::move(options)) {}

  ~CurlTransport() override {
    idle_.clear();  // handles first: they point at the blobs below
    OPENSSL_cleanse(options_.client_key_pem.data(),
                    options_.client_key_pem.size());
    OPENSSL_cleanse(options_.bearer_token.data(), options_.bearer_token.size());
  }

  Outcome perform(const HttpRequest& request, std::chrono::milliseconds timeout,
                  std::chrono::milliseconds connect_timeout,
                  const OnData& on_data) override {
    CurlPtr handle = take_handle(on_data != nullptr);
    if (!handle)
      return TransportError{Failure::kOther, "curl_easy_init failed", 0, {}};
    Transfer transfer;
    transfer.handle = handle.get();
    transfer.request = &request;
    transfer.on_data = &on_data;
    char errbuf[CURL_ERROR_SIZE] = {0};
    CurlSlistPtr headers;
    if (auto problem = configure(handle.get(), request, timeout,
                                 connect_timeout, transfer, errbuf, headers)) {
      return *problem;
    }
    const CURLcode rc = curl_easy_perform(handle.get());
    const int status = response_code(handle.get());
    curl_off_t connect_us = 0;
    curl_easy_getinfo(handle.get(), CURLINFO_APPCONNECT_TIME_T, &connect_us);
    char* final_url = nullptr;
    if (curl_easy_getinfo(handle.get(), CURLINFO_EFFECTIVE_URL, &final_url) ==
            CURLE_OK &&
        final_url != nullptr)
      transfer.response.final_url = final_url;
    // The idle handle must not point at this stack frame's buffer.
    curl_easy_setopt(handle.get(), CURLOPT_ERRORBUFFER,
                     static_cast<char*>(nullptr));
    give_back(std::move(handle));
    if (transfer.thrown) std::rethrow_exception(transfer.thrown);

    if (rc == CURLE_OK ||
        (rc == CURLE_WRITE_ERROR && transfer.response.stopped)) {
      transfer.response.status = status;
      return std::move(transfer.response);
    }
    const int code = static_cast<int>(rc);
    const std::string reason = curl_easy_strerror(rc);
    if (transfer.too_big) {
      return TransportError{Failure::kTooLarge,
                            "the response is larger than " +
                                std::to_string(request.max_body >> 20) + " MiB",
                            code, reason};
    }
    std::string detail = errbuf[0] ? errbuf : reason;
    return TransportError{classify(rc, detail, connect_us > 0), detail, code,
                          reason};
  }

 private:
  // Sets every option for one request on a freshly reset handle (reset
  // keeps the live connection and TLS session, so they are reused).
  std::optional<TransportError> configure(
      CURL* h, const HttpRequest& request, std::chrono::milliseconds timeout,
      std::chrono::milliseconds connect_timeout, Transfer& transfer,
      char* errbuf, CurlSlistPtr& headers) {
    curl_easy_reset(h);
    std::string failed;
    auto set = [&](CURLoption option, auto value, const char* name) {
      if (!failed.empty()) return;
      const CURLcode rc = curl_easy_setopt(h, option, value);
      if (rc != CURLE_OK)
        failed = std::string(name) + ": " + curl_easy_strerror(rc);
    };
    const std::string url = options_.base_url + request.target;
    set(CURLOPT_URL, url.c_str(), "CURLOPT_URL");
    set(CURLOPT_ERRORBUFFER, errbuf, "CURLOPT_ERRORBUFFER");
    set(CURLOPT_NOSIGNAL, 1L, "CURLOPT_NOSIGNAL");
    // Plain HTTP only when asked; a redirect must never downgrade HTTPS.
    const char* protocols = options_.allow_plain_http ? "http,https" : "https";
    set(CURLOPT_PROTOCOLS_STR, protocols, "CURLOPT_PROTOCOLS_STR");
    if (options_.follow_redirects) {
      // A redirect that changes host drops our Authorization header, as it
      // must (libcurl does so unless CURLOPT_UNRESTRICTED_AUTH).
      set(CURLOPT_FOLLOWLOCATION, 1L, "CURLOPT_FOLLOWLOCATION");
      set(CURLOPT_MAXREDIRS, 10L, "CURLOPT_MAXREDIRS");
      set(CURLOPT_REDIR_PROTOCOLS_STR, protocols,
          "CURLOPT_REDIR_PROTOCOLS_STR");
    } else {
      set(CURLOPT_FOLLOWLOCATION, 0L, "CURLOPT_FOLLOWLOCATION");
    }
    if (options_.http1_only) {
      set(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1),
          "CURLOPT_HTTP_VERSION");
    }
    if (!options_.no_proxy.empty())
      set(CURLOPT_NOPROXY, options_.no_proxy.c_str(), "CURLOPT_NOPROXY");
    if (options_.tcp_keepalive)
      set(CURLOPT_TCP_KEEPALIVE, 1L, "CURLOPT_TCP_KEEPALIVE");

    set(CURLOPT_SSL_VERIFYPEER, 1L, "CURLOPT_SSL_VERIFYPEER");
    set(CURLOPT_SSL_VERIFYHOST, 2L, "CURLOPT_SSL_VERIFYHOST");
    curl_blob ca{options_.ca_pem.data(), options_.ca_pem.size(),
                 CURL_BLOB_NOCOPY};
    if (!options_.ca_pem.empty()) {
      // Trust exactly this CA: no system bundle or directory.
      set(CURLOPT_CAINFO, static_cast<const char*>(nullptr), "CURLOPT_CAINFO");
      set(CURLOPT_CAPATH, static_cast<const char*>(nullptr), "CURLOPT_CAPATH");
      set(CURLOPT_CAINFO_BLOB, &ca, "CURLOPT_CAINFO_BLOB");
    } else if (!options_.ca_file.empty()) {
      set(CURLOPT_CAINFO, options_.ca_file.c_str(), "CURLOPT_CAINFO");
    }
    // NOCOPY: libcurl would free its copies of the key without wiping
    // them; ours are wiped when the transport goes away.
    curl_blob cert{options_.client_cert_pem.data(),
                   options_.client_cert_pem.size(), CURL_BLOB_NOCOPY};
    curl_blob key{options_.client_key_pem.data(),
                  options_.client_key_pem.size(), CURL_BLOB_NOCOPY};
    if (!options_.client_cert_pem.empty()) {
      set(CURLOPT_SSLCERT_BLOB, &cert, "CURLOPT_SSLCERT_BLOB");
      set(CURLOPT_SSLCERTTYPE, "PEM", "CURLOPT_SSLCERTTYPE");
      set(CURLOPT_SSLKEY_BLOB, &key, "CURLOPT_SSLKEY_BLOB");
      set(CURLOPT_SSLKEYTYPE, "PEM", "CURLOPT_SSLKEYTYPE");
    }

    std::vector<std::string> lines;
    if (!request.accept.empty()) lines.push_back("Accept: " + request.accept);
    lines.push_back("Expect:");
    if (!request.content_type.empty()) {
      lines.push_back("Content-Type: " + request.content_type);
    }
    if (!options_.bearer_token.empty())
      lines.push_back("Authorization: Bearer " + options_.bearer_token);
    lines.insert(lines.end(), request.headers.begin(), request.headers.end());
    for (const auto& line : lines) {
      curl_slist* next = curl_slist_append(headers.get(), line.c_str());
      if (!next) return TransportError{Failure::kOther, "out of memory", 0, {}};
      (void)headers.release();
      headers.reset(next);
    }
    set(CURLOPT_HTTPHEADER, headers.get(), "CURLOPT_HTTPHEADER");
    set(CURLOPT_USERAGENT, "gpunode/" GPUNODE_VERSION, "CURLOPT_USERAGENT");

    if (request.method == "GET") {
      set(CURLOPT_HTTPGET, 1L, "CURLOPT_HTTPGET");
    } else {
      set(CURLOPT_CUSTOMREQUEST, request.method.c_str(),
          "CURLOPT_CUSTOMREQUEST");
      if (!request.content_type.empty()) {
        set(CURLOPT_POSTFIELDSIZE_LARGE,
            static_cast<curl_off_t>(request.body.size()),
            "CURLOPT_POSTFIELDSIZE_LARGE");
        set(CURLOPT_POSTFIELDS, request.body.c_str(), "CURLOPT_POSTFIELDS");
      }
    }

    set(CURLOPT_TIMEOUT_MS,
        static_cast<long>(std::max<long long>(timeout.count(), 1)),
        "CURLOPT_TIMEOUT_MS");
    set(CURLOPT_CONNECTTIMEOUT_MS,
        static_cast<long>(std::max<long long>(connect_timeout.count(), 1)),
        "CURLOPT_CONNECTTIMEOUT_MS");
    set(CURLOPT_LOW_SPEED_LIMIT, options_.low_speed_bytes,
        "CURLOPT_LOW_SPEED_LIMIT");
    set(CURLOPT_LOW_SPEED_TIME, options_.low_speed_seconds,
        "CURLOPT_LOW_SPEED_TIME");

    // A Ctrl-C must not wait out a quiet transfer: libcurl calls this about
    // once a second, and a non-zero return aborts the transfer.
    set(CURLOPT_XFERINFOFUNCTION, &on_progress, "CURLOPT_XFERINFOFUNCTION");
    set(CURLOPT_NOPROGRESS, 0L, "CURLOPT_NOPROGRESS");
    set(CURLOPT_WRITEFUNCTION, &on_write, "CURLOPT_WRITEFUNCTION");
    set(CURLOPT_WRITEDATA, static_cast<void*>(&transfer), "CURLOPT_WRITEDATA");
    set(CURLOPT_HEADERFUNCTION, &on_header, "CURLOPT_HEADERFUNCTION");
    set(CURLOPT_HEADERDATA, static_cast<void*>(&transfer),
        "CURLOPT_HEADERDATA");
    if (!failed.empty()) {
      return TransportError{Failure::kLocalCert,
                            "this libcurl (" + std::string(curl_version()) +
                                ") refused " + failed,
                            0,
                            {}};
    }
    return std::nullopt;
  }

  // Handles are pooled rather than shared: a watch callback may issue
  // other requests while its own transfer is still running. A request
  // takes the most recently used handle (its connection is the likeliest
  // open). A streamed one (a watch, a download) leaves that one to the
  // requests made meanwhile and after: it takes the oldest of two or more,
  // else a new handle, so its TLS handshake comes when it starts, not
  // after the watched-for event (issue 24: the allocatable watch).
  CurlPtr take_handle(bool streamed) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty() && !streamed) {
        CurlPtr h = std::move(idle_.back());
        idle_.pop_back();
        return h;
      }
      if (idle_.size() >= 2) {
        CurlPtr h = std::move(idle_.front());
        idle_.erase(idle_.begin());
        return h;
      }
    }
    return CurlPtr(curl_easy_init());
  }

  // take_handle() takes requests' handles from the back: a handle whose
  // connection is still open goes there, one whose connection is gone (a
  // watch stopped mid-stream, which libcurl must close) to the front, so
  // the next request reuses a live connection instead of paying a new TLS
  // handshake (issue 24: after the allocatable watch, the stage's check).
  void give_back(CurlPtr handle) {
    curl_socket_t socket = CURL_SOCKET_BAD;
    const bool live = curl_easy_getinfo(handle.get(), CURLINFO_ACTIVESOCKET,
                                        &socket) == CURLE_OK &&
                      socket != CURL_SOCKET_BAD;
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() >= 4) return;
    if (live)
      idle_.push_back(std::move(handle));
    else
      idle_.insert(idle_.begin(), std::move(handle));
  }

  CurlOptions options_;
  std::mutex mu_;
  std::vector<CurlPtr> idle_;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_curl_transport(CurlOptions options) {
  static std::once_flag once;
  static CURLcode init = CURLE_OK;
  // curl_global_init is not thread-safe; do it once, before any handle.
  std::call_once(once, [] { init = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (init != CURLE_OK) {
    return Error{
        ExitCode::kCannotRun,
        options.layer,
        std::string("cannot initialise libcurl: ") + curl_easy_strerror(init),
        {}};
  }
  // The in-memory certificate options need libcurl 7.77 with OpenSSL;
  // refuse an older or different build instead of writing keys to files.
  const curl_version_info_data* info = curl_version_info(CURLVERSION_NOW);
  const std::string ssl = info && info->ssl_version ? info->ssl_version : "";
  const bool from_memory =
      !options.ca_pem.empty() || !options.client_cert_pem.empty();
  if (from_memory &&
      (!info || info->version_num < 0x074D00 || ssl.rfind("OpenSSL", 0) != 0)) {
    return Error{ExitCode::kCannotRun, options.layer,
                 "this libcurl (" + std::string(curl_version()) +
                     ") cannot take TLS certificates from memory; gpunode "
                     "needs libcurl 7.77 or newer built with OpenSSL",
                 "install libcurl4 (the OpenSSL flavour), e.g. apt-get install "
                 "libcurl4"};
  }
  return std::unique_ptr<Transport>(
      std::make_unique<CurlTransport>(std::move(options)));
}

}  // namespace gpunode::http
