// A real OCI registry for tests: Debian's docker-registry (distribution 2.8)
// on loopback, plain HTTP, its storage in a temp dir the test can damage;
// images are pushed into it with the real skopeo.
#pragma once

#include <memory>
#include <string>

#include "test_support.hpp"

namespace gpunode::test {

// How the registry wants clients to authenticate (distribution's auth:
// config section).
struct RegistryAuth {
  enum class Kind {
    kNone,      // anonymous pulls and pushes
    kHtpasswd,  // auth.htpasswd: 401 "Basic realm=..." (htpasswd -B file)
    kToken,     // auth.token: 401 "Bearer realm,service,scope", tokens from
                // test/sim/token_server.py (JWTs it signs, x5c)
  };
  Kind kind = Kind::kNone;
  std::string user = "gpunode-ci";
  std::string password = "Pa55-word-only-in-the-test";
};

class Registry {
 public:
  // Starts it on 127.0.0.1 and a free port and waits until it accepts
  // connections. tls: HTTPS with a certificate for IP 127.0.0.1 from a CA
  // made for this registry (ca_file()); otherwise plain HTTP. Throws
  // std::runtime_error (with its log) when it does not come up in 10 s.
  // Stopped (its process group killed) when destroyed.
  // auth: the credentials it takes (push() uses them).
  explicit Registry(bool tls = false, RegistryAuth auth = {});
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // "127.0.0.1:PORT"
  const std::string& host() const { return host_; }
  // The CA that signed its certificate (PEM); empty without tls.
  const std::string& ca_file() const { return ca_file_; }
  const RegistryAuth& auth() const { return auth_; }
  // kToken: the token service's log, one "token|refused USER PATH" line a
  // request (USER "-" when anonymous); "" otherwise.
  std::string token_log() const;
  // `skopeo copy --all` of an OCI-layout tar to host()/repo_tag. Throws on
  // failure, with skopeo's message.
  void push(const std::string& oci_archive, const std::string& repo_tag);
  // The file holding a blob's bytes in the registry's storage.
  std::string blob_path(const std::string& digest) const;

 private:
  std::unique_ptr<TempDir> dir_;
  std::string host_;
  std::string ca_file_;
  RegistryAuth auth_;
  std::unique_ptr<Background> token_server_;
  std::unique_ptr<Background> process_;
};

// docker-registry and skopeo are installed (scripts/setup.sh).
bool registry_available();

}  // namespace gpunode::test
