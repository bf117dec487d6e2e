// Registry auth files (bundle/include/gpunode/registry_auth.hpp). The format
// and the search rules are containers-auth.json(5)'s; the key normalisation
// follows containers/image's pkg/docker/config (normalizeAuthFileKey,
// normalizeRegistry), which is what podman and skopeo do with the same
// files, so one file works for all three.
#include "gpunode/registry_auth.hpp"

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "gpunode/base64.hpp"
#include "gpunode/bundle_trust.hpp"

namespace gpunode::bundle {
namespace {

using nlohmann::json;

constexpr const char* kHub = "docker.io";
constexpr std::size_t kMaxAuthFileBytes = 1024 * 1024;

Error bad_file(const std::string& path, const std::string& why) {
  return Error{ExitCode::kUsage, "registry",
               "registry auth file " + path + ": " + why,
               "the format is containers-auth.json(5): {\"auths\": "
               "{\"HOST\": {\"auth\": \"base64 of user:password\"}}}"};
}

// Docker Hub has several names: containers/image's normalizeRegistry folds
// registry-1.docker.io and docker.io into index.docker.io (the host of
// Docker's own "https://index.docker.io/v1/" key). The same three are one
// here, spelled docker.io.
std::string normal_host(const std::string& host) {
  if (host == "registry-1.docker.io" || host == "index.docker.io" ||
      host == kHub)
    return kHub;
  return host;
}

// A key without a scheme is "host" or "host/namespace..."; only its host
// part is normalised.
std::string normal_key(const std::string& key) {
  const auto slash = key.find('/');
  if (slash == std::string::npos) return normal_host(key);
  return normal_host(key.substr(0, slash)) + key.substr(slash);
}

// "https://host/v1/" -> "host": such keys name a registry, never a
// namespace (normalizeAuthFileKey drops the path after a scheme).
std::optional<std::string> url_key_host(const std::string& key) {
  for (const char* scheme : {"https://", "http://"}) {
    const std::string s = scheme;
    if (key.compare(0, s.size(), s) == 0) {
      const std::string rest = key.substr(s.size());
      return normal_host(rest.substr(0, rest.find('/')));
    }
  }
  return std::nullopt;
}

void wipe(std::string& s) { OPENSSL_cleanse(s.data(), s.size()); }

Result<AuthFile::Entry> parse_entry(const std::string& path,
                                    const std::string& key, const json& v) {
  const std::string where = "the entry for \"" + key + "\"";
  if (!v.is_object()) return bad_file(path, where + " is not an object");
  AuthFile::Entry e;
  e.key = key;
  for (const char* field : {"auth", "username", "password", "identitytoken"})
    if (v.contains(field) && !v.at(field).is_string())
      return bad_file(path, where + ": \"" + field + "\" is not a string");
  const std::string auth = v.value("auth", std::string());
  if (!auth.empty()) {
    auto decoded = decode_base64(auth);
    const auto colon = decoded ? decoded->find(':') : std::string::npos;
    if (!decoded || colon == std::string::npos || colon == 0) {
      if (decoded) wipe(*decoded);
      return bad_file(path, where +
                                ": \"auth\" is not base64 of "
                                "\"user:password\"");
    }
    e.username = decoded->substr(0, colon);
    e.password = decoded->substr(colon + 1);
    wipe(*decoded);
  }
  // Docker's config.json may spell them out instead; those win.
  if (v.contains("username")) e.username = v.at("username").get<std::string>();
  if (v.contains("password")) e.password = v.at("password").get<std::string>();
  e.identity_token = !v.value("identitytoken", std::string()).empty();
  return e;
}

bool has_credentials(const AuthFile::Entry& e) {
  return !e.username.empty() || !e.password.empty();
}

// Where `entry` (found under `key`) leads: credentials, an error naming a
// helper, or nullopt for an empty entry with no helper (keep searching).
Result<std::optional<RegistryCredentials>> use_entry(
    const AuthFile& file, const AuthFile::Entry& entry) {
  const std::string where = file.path + " (key \"" + entry.key + "\")";
  // docker login keeps a placeholder user beside the token (ACR's
  // "00000000-...:"), which as Basic would only be refused.
  if (entry.identity_token)
    return Error{ExitCode::kUsage, "registry",
                 where +
                     " holds an identitytoken (an OAuth2 refresh token); "
                     "gpunode does not exchange those",
                 "log in with a user name and password or an access token "
                 "instead: podman login --authfile FILE HOST"};
  if (!has_credentials(entry)) {
    if (file.creds_store.empty()) return std::optional<RegistryCredentials>();
    return Error{ExitCode::kUsage, "registry",
                 where +
                     ": the credentials are in the credential helper "
                     "docker-credential-" +
                     file.creds_store +
                     " (credsStore); gpunode does not run helper programs",
                 "write them into a file: podman login --authfile FILE HOST, "
                 "then --registry-auth FILE"};
  }
  RegistryCredentials c;
  c.username = entry.username;
  c.password = entry.password;
  c.source = where;
  return std::optional<RegistryCredentials>(std::move(c));
}

}  // namespace

RegistryCredentials::~RegistryCredentials() { wipe(password); }

Result<AuthFile> parse_auth_file(const std::string& path,
                                 const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception&) {
    // nlohmann's message quotes the text near the error: never shown.
    return bad_file(path, "not JSON");
  }
  if (!j.is_object()) return bad_file(path, "not a JSON object");
  AuthFile out;
  out.path = path;
  if (j.contains("auths")) {
    const json& auths = j.at("auths");
    if (!auths.is_object()) return bad_file(path, "\"auths\" is not an object");
    for (const auto& [key, value] : auths.items()) {
      auto e = parse_entry(path, key, value);
      if (!e) return e.error();
      if (auto host = url_key_host(key))
        out.url_auths.emplace(*host, std::move(*e));
      else
        out.auths.emplace(normal_key(key), std::move(*e));
    }
  }
  if (j.contains("credHelpers")) {
    const json& helpers = j.at("credHelpers");
    if (!helpers.is_object())
      return bad_file(path, "\"credHelpers\" is not an object");
    for (const auto& [key, value] : helpers.items()) {
      if (!value.is_string())
        return bad_file(path,
                        "\"credHelpers\" of \"" + key + "\" is not a string");
      out.cred_helpers.emplace(normal_key(key), value.get<std::string>());
    }
  }
  if (j.contains("credsStore")) {
    if (!j.at("credsStore").is_string())
      return bad_file(path, "\"credsStore\" is not a string");
    out.creds_store = j.at("credsStore").get<std::string>();
  }
  return out;
}

std::vector<std::string> default_auth_files(const EnvLookup& env) {
  std::vector<std::string> out;
  auto var = [&](const char* name) {
    auto v = env(name);
    return v && !v->empty() ? v : std::nullopt;
  };
  if (auto f = var("REGISTRY_AUTH_FILE")) out.push_back(*f);
  if (auto d = var("XDG_RUNTIME_DIR"))
    out.push_back(*d + "/containers/auth.json");
  const auto home = var("HOME");
  if (auto d = var("XDG_CONFIG_HOME"))
    out.push_back(*d + "/containers/auth.json");
  else if (home)
    out.push_back(*home + "/.config/containers/auth.json");
  if (home) out.push_back(*home + "/.docker/config.json");
  return out;
}

std::optional<std::string> process_env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

Result<std::vector<AuthFile>> load_auth_files(const std::string& explicit_path,
                                              const EnvLookup& env) {
  std::vector<std::string> paths;
  if (!explicit_path.empty()) {
    paths.push_back(explicit_path);
  } else {
    for (const auto& p : default_auth_files(env)) {
      struct stat st {};
      if (::stat(p.c_str(), &st) == 0) paths.push_back(p);
    }
  }
  std::vector<AuthFile> out;
  for (const auto& p : paths) {
    // Docker's config.json holds more than credentials (proxies, plugins,
    // one entry per registry ever logged in to): a larger cap than a key's.
    auto text = read_key_file(
        p, explicit_path.empty() ? "registry auth file" : "--registry-auth",
        kMaxAuthFileBytes, "a registry auth file");
    if (!text) return text.error();
    auto file = parse_auth_file(p, *text);
    wipe(*text);
    if (!file) return file.error();
    struct stat st {};
    file->readable_by_others =
        ::stat(p.c_str(), &st) == 0 && (st.st_mode & 044) != 0;
    out.push_back(std::move(*file));
  }
  return out;
}

std::string helper_note(const std::vector<AuthFile>& files) {
  for (const AuthFile& file : files)
    if (!file.creds_store.empty())
      return file.path + " names the credential helper docker-credential-" +
             file.creds_store + " (credsStore), which gpunode does not run";
  return "";
}

Result<std::optional<RegistryCredentials>> credentials_for(
    const std::vector<AuthFile>& files, const std::string& ref) {
  auto parsed = parse_image_ref(ref);
  if (!parsed) return parsed.error();
  const std::string host = normal_host(parsed->registry);
  // Most specific first: "host/a/b/repo", "host/a/b", "host/a", "host".
  std::vector<std::string> keys;
  std::string path = host + "/" + parsed->repository;
  while (true) {
    keys.push_back(path);
    const auto slash = path.rfind('/');
    if (slash == std::string::npos) break;
    path = path.substr(0, slash);
  }
  for (const AuthFile& file : files) {
    if (auto h = file.cred_helpers.find(host); h != file.cred_helpers.end())
      return Error{ExitCode::kUsage, "registry",
                   file.path + ": the credentials for " + host +
                       " are in the credential helper docker-credential-" +
                       h->second +
                       " (credHelpers); gpunode does not run helper programs",
                   "write them into a file: podman login --authfile FILE " +
                       host + ", then --registry-auth FILE"};
    const AuthFile::Entry* found = nullptr;
    for (const auto& k : keys) {
      if (auto e = file.auths.find(k); e != file.auths.end()) {
        found = &e->second;
        break;
      }
    }
    if (found == nullptr) {
      if (auto e = file.url_auths.find(host); e != file.url_auths.end())
        found = &e->second;
    }
    if (found == nullptr) continue;
    auto use = use_entry(file, *found);
    if (!use) return use.error();
    if (*use) return use;
  }
  return std::optional<RegistryCredentials>();
}

}  // namespace gpunode::bundle
