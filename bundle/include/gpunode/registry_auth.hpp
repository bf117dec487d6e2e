// Registry credentials for `bundle create --pull`, from the auth files that
// `podman login`, `skopeo login` and `docker login` write
// (containers-auth.json(5); Docker's config.json is the same "auths"
// format):
//
//   {"auths": {"nvcr.io": {"auth": base64("$oauthtoken:API-KEY")},
//              "harbor.example.com/nvidia": {"username": "u",
//                                            "password": "p"}}}
//
// The files are read once; their contents (and the secrets in them) never
// reach a message, the journal, --json output or the bundle: errors name
// the file and the key only.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/registry_pull.hpp"
#include "gpunode/result.hpp"

namespace gpunode::bundle {

// One parsed auth file. Keys are normalised (see credentials_for).
struct AuthFile {
  struct Entry {
    std::string key;  // as written in the file, for messages
    std::string username;
    std::string password;
    bool identity_token = false;  // an OAuth2 refresh token (not exchanged)
  };
  std::string path;
  std::map<std::string, Entry> auths;               // "host[/namespace]"
  std::map<std::string, Entry> url_auths;           // "https://host/..." keys
  std::map<std::string, std::string> cred_helpers;  // host -> helper name
  std::string creds_store;                          // helper for all hosts
  bool readable_by_others = false;                  // mode & 044
};

// Parses an auth file's text. Errors: kUsage naming `path` and the key at
// fault (never a value): not JSON, not an object, "auths" or an entry not an
// object, "auth" not base64 of "user:password", a non-string field.
Result<AuthFile> parse_auth_file(const std::string& path,
                                 const std::string& text);

// The places containers-auth.json(5) reads, in its order:
// $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,
// $XDG_CONFIG_HOME/containers/auth.json (or $HOME/.config/...),
// $HOME/.docker/config.json. Unset variables are skipped. (The legacy
// $HOME/.dockercfg, a different format, is not read.)
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
std::vector<std::string> default_auth_files(const EnvLookup& env);

// `explicit_path` set (--registry-auth): that file alone, which must exist
// and parse (kUsage naming it otherwise). Else every default place that
// exists, in order; none: an empty list (anonymous pulls, as without
// credentials). A default file that exists but is malformed is kUsage too:
// silently pulling anonymously would hide the mistake.
Result<std::vector<AuthFile>> load_auth_files(const std::string& explicit_path,
                                              const EnvLookup& env);

// The process environment, for load_auth_files.
std::optional<std::string> process_env(const char* name);

// The credentials for `ref` (a --pull reference), searched in the files in
// order until one has an entry: in each file the credHelpers entry for the
// host first (as docker does), then the most specific repository namespace
// down to the host ("h/a/b/repo", "h/a/b", "h/a", "h"), then the
// "https://host/..." keys docker login once wrote. Docker Hub is "docker.io"
// whatever the spelling (registry-1.docker.io, index.docker.io, Docker's
// "https://index.docker.io/v1/"). nullopt: no entry, pull anonymously.
// Errors (kUsage, naming the file and key): the entry's credentials are in
// a helper program (credHelpers, or an empty entry with credsStore), which
// gpunode does not run; the entry holds an identitytoken.
Result<std::optional<RegistryCredentials>> credentials_for(
    const std::vector<AuthFile>& files, const std::string& ref);

// When credentials_for found none: the first file that names a credsStore
// helper (for every registry), as "FILE names the credential helper
// docker-credential-NAME (credsStore), which gpunode does not run"; ""
// when none does.
std::string helper_note(const std::vector<AuthFile>& files);

}  // namespace gpunode::bundle
