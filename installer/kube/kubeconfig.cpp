// Kubeconfig loading. yaml-cpp reports problems by throwing; everything
// here catches at the call into yaml-cpp and turns it into an Error naming
// the file and the key, so the operator can fix the file without guessing.
#include <yaml-cpp/yaml.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpunode/base64.hpp"
#include "gpunode/kube.hpp"
#include "gpunode/text.hpp"

namespace gpunode::kube {
namespace {

// A kubeconfig with embedded certificates is a few KiB; anything near this
// size is not one, and reading it whole would only waste memory.
constexpr std::size_t kMaxKubeconfigBytes = 1 << 20;
constexpr std::size_t kMaxReferencedFileBytes = 1 << 20;

using ReadFile = std::function<Result<std::string>(const std::string&)>;

Error malformed(const std::string& source, const std::string& what,
                std::string fix = {}) {
  // Without a fix of its own: where to look, and the usual right file.
  if (fix.empty())
    fix = "kubectl --kubeconfig " + shell_word(source) +
          " config view shows what is wrong with it; or give --kubeconfig "
          "the cluster's (on a k3s server: /etc/rancher/k3s/k3s.yaml)";
  return Error{ExitCode::kUsage, "kubeconfig", source + ": " + what,
               std::move(fix)};
}

enum class PemKind { kCertificate, kPrivateKey };

// A cheap structural check, so that a kubeconfig holding e.g. a DER file or
// a base64-of-base64 value is named here, at the key that holds it, instead
// of later as an opaque TLS error. connect() parses the real thing.
std::optional<std::string> pem_problem(const std::string& text, PemKind kind) {
  const bool begin = text.find("-----BEGIN ") != std::string::npos;
  const bool end = text.find("-----END ") != std::string::npos;
  if (!begin || !end) {
    return kind == PemKind::kCertificate
               ? "is not a PEM certificate (no -----BEGIN CERTIFICATE----- "
                 "block)"
               : "is not a PEM private key (no -----BEGIN ... PRIVATE "
                 "KEY----- block)";
  }
  if (kind == PemKind::kCertificate) {
    if (text.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return "is PEM but holds no certificate (no -----BEGIN "
             "CERTIFICATE----- block)";
    }
    return std::nullopt;
  }
  if (text.find("-----BEGIN ENCRYPTED PRIVATE KEY-----") != std::string::npos ||
      text.find("Proc-Type: 4,ENCRYPTED") != std::string::npos) {
    return "is an encrypted private key; gpunode cannot ask for a passphrase";
  }
  if (text.find("PRIVATE KEY-----") == std::string::npos) {
    return "is PEM but holds no private key (no -----BEGIN ... PRIVATE "
           "KEY----- block)";
  }
  return std::nullopt;
}

// Relative file references in a kubeconfig are relative to the folder the
// kubeconfig is in (kubectl's rule), not to the working directory.
std::string resolve_relative(const std::string& source,
                             const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const auto slash = source.rfind('/');
  if (slash == std::string::npos) return path;
  return source.substr(0, slash + 1) + path;
}

std::string mode_text(unsigned mode) {
  char octal[8];
  std::snprintf(octal, sizeof octal, "%04o", mode & 07777);
  return "(mode " + std::string(octal) + ")";
}

std::string readable_by(unsigned mode) {
  return (mode & 004) != 0 ? "every local user" : "its group";
}

// k3s writes k3s.yaml 0600 unless told otherwise; `--write-kubeconfig-mode
// 644` (common, so that kubectl works without sudo) hands the admin
// credentials to every local user. Only a kubeconfig that embeds the key
// or token is a secret; one that names files (the kubelet's) is not.
std::string loose_kubeconfig_warning(const std::string& path, unsigned mode,
                                     bool key) {
  const bool k3s_admin = path == "/etc/rancher/k3s/k3s.yaml";
  std::string text = path + " is readable by " + readable_by(mode) + " " +
                     mode_text(mode) + " and holds " +
                     (key ? "a client key" : "a bearer token");
  if (k3s_admin)
    return text +
           " (the cluster admin's): whoever reads it controls the cluster. "
           "Fix: chmod 600 " +
           path +
           ", and set write-kubeconfig-mode: \"0600\" in "
           "/etc/rancher/k3s/config.yaml so that k3s writes it so again";
  return text +
         ": whoever reads it can act as the user it names. Fix: chmod "
         "600 " +
         path;
}

// A key or token file a kubeconfig names (k3s's client-kubelet.key is
// written 0600): readable by others, anyone can act as its user (for the
// kubelet's, as this node).
std::string loose_credential_file_warning(const std::string& path,
                                          unsigned mode,
                                          const std::string& source, bool key) {
  return path + " is readable by " + readable_by(mode) + " " + mode_text(mode) +
         " and is the " + (key ? "client key" : "bearer token") + " " + source +
         " names: whoever reads it can act as that user (for the kubelet's "
         "client-kubelet.key, as this node). Fix: chmod 600 " +
         path;
}

// A key or token file a kubeconfig names, owned by a user other than root
// and the kubeconfig's owner: that user can read it (and chmod it) whatever
// its mode, and so act as the user it names.
std::string foreign_credential_file_warning(const std::string& path,
                                            unsigned uid,
                                            const std::string& source,
                                            bool key) {
  return path + " is owned by uid " + std::to_string(uid) +
         ", neither root nor the owner of " + source + ", and is the " +
         (key ? "client key" : "bearer token") + " " + source +
         " names: that user can read it and act as the user it names (for "
         "the kubelet's client-kubelet.key, as this node). Fix: chown root " +
         path + " && chmod 600 " + path;
}

// One kubeconfig parse, with the state every helper needs for messages.
class Parser {
 public:
  Parser(const std::string& source, const ReadFile& read_file)
      : source_(source), read_file_(read_file) {}

  Result<Kubeconfig> parse(const YAML::Node& root);

 private:
  // The scalar at map[key] as a string; nullopt when absent or null.
  Result<std::optional<std::string>> scalar(const YAML::Node& map,
                                            const std::string& where,
                                            const std::string& key) const {
    const YAML::Node node = map[key];
    if (!node.IsDefined() || node.IsNull()) return std::optional<std::string>{};
    if (!node.IsScalar()) {
      return malformed(source_, where + "." + key + " is not a string");
    }
    return std::optional<std::string>(node.as<std::string>());
  }

  // The entry `name` of a named list (clusters, users, contexts), i.e. the
  // map under entry[inner].
  Result<YAML::Node> named(const YAML::Node& root, const std::string& list,
                           const std::string& inner,
                           const std::string& name) const {
    const YAML::Node seq = root[list];
    if (!seq.IsDefined() || seq.IsNull()) {
      return malformed(source_, "has no " + list + " (needed for " + inner +
                                    " \"" + name + "\")");
    }
    if (!seq.IsSequence()) return malformed(source_, list + " is not a list");
    std::vector<std::string> names;
    for (const auto& entry : seq) {
      if (!entry.IsMap() || !entry["name"].IsScalar()) continue;
      const std::string entry_name = entry["name"].as<std::string>();
      if (entry_name != name) {
        names.push_back(entry_name);
        continue;
      }
      const YAML::Node body = entry[inner];
      if (!body.IsMap()) {
        return malformed(source_, list + "[" + name + "]." + inner +
                                      " is missing or not a mapping");
      }
      return body;
    }
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    return malformed(source_,
                     inner + " \"" + name + "\" is not defined in " + list +
                         (known.empty() ? "" : " (it has: " + known + ")"));
  }

  // Inline base64 data (`<key>-data`) or a file (`<key>`), data first as
  // kubectl does. nullopt when neither is set.
  // `file_path`, when given, gets the file's path (untouched for inline
  // data).
  Result<std::optional<std::string>> data_or_file(
      const YAML::Node& map, const std::string& where, const std::string& key,
      PemKind kind, std::string* file_path = nullptr) const {
    auto data = scalar(map, where, key + "-data");
    if (!data) return data.error();
    std::string pem;
    std::string named_key;
    if (*data && !(*data)->empty()) {
      named_key = where + "." + key + "-data";
      auto decoded = decode_base64(**data);
      if (!decoded) {
        return malformed(source_, named_key + " is not valid base64");
      }
      pem = std::move(*decoded);
    } else {
      auto file = scalar(map, where, key);
      if (!file) return file.error();
      if (!*file || (*file)->empty()) return std::optional<std::string>{};
      named_key = where + "." + key;
      const std::string path = resolve_relative(source_, **file);
      auto text = read_file_(path);
      if (!text) {
        Error e = text.error();
        e.layer = "kubeconfig";
        e.message = source_ + ": " + named_key + ": " + e.message;
        return e;
      }
      pem = std::move(*text);
      named_key += " (" + path + ")";
      if (file_path != nullptr) *file_path = path;
    }
    if (auto problem = pem_problem(pem, kind)) {
      return malformed(source_, named_key + " " + *problem);
    }
    return std::optional<std::string>(std::move(pem));
  }

  const std::string& source_;
  const ReadFile& read_file_;
};

Result<Kubeconfig> Parser::parse(const YAML::Node& root) {
  if (!root.IsMap()) {
    return malformed(source_,
                     "is not a kubeconfig (expected a YAML mapping with "
                     "clusters, users and contexts)");
  }
  // kubectl refuses a file where two entries of one list share a name
  // (client-go tools/clientcmd/api/v1/conversion.go: "duplicate name %q in
  // list" for clusters, users and contexts): which one is meant would be a
  // guess, and the first and the last differ in who gets trusted.
  for (const char* list : {"clusters", "users", "contexts"}) {
    const YAML::Node seq = root[list];
    // Absent or not a list: named() says so where the entry is needed.
    if (!seq.IsDefined() || !seq.IsSequence()) continue;
    std::set<std::string> seen;
    for (const auto& entry : seq) {
      if (!entry.IsMap() || !entry["name"].IsScalar()) continue;
      const std::string name = entry["name"].as<std::string>();
      if (!seen.insert(name).second) {
        return malformed(
            source_,
            std::string(list) + " has two entries named \"" + name +
                "\" (kubectl refuses such a file: duplicate name in list)",
            "rename or remove one of the " + std::string(list) + " named \"" +
                name + "\" in " + source_);
      }
    }
  }
  Kubeconfig config;
  config.source = source_;

  // The context: current-context, or the only one there is.
  auto current = scalar(root, "", "current-context");
  if (!current) return current.error();
  if (*current && !(*current)->empty()) {
    config.context = **current;
  } else {
    const YAML::Node contexts = root["contexts"];
    if (contexts.IsSequence() && contexts.size() == 1 &&
        contexts[0]["name"].IsScalar()) {
      config.context = contexts[0]["name"].as<std::string>();
    } else {
      return malformed(source_,
                       "current-context is not set and there is not exactly "
                       "one context to use",
                       "set current-context: NAME in " + source_);
    }
  }

  auto context = named(root, "contexts", "context", config.context);
  if (!context) return context.error();
  const std::string context_where = "contexts[" + config.context + "].context";
  auto cluster_name = scalar(*context, context_where, "cluster");
  if (!cluster_name) return cluster_name.error();
  if (!*cluster_name || (*cluster_name)->empty()) {
    return malformed(source_, context_where + ".cluster is missing");
  }
  auto user_name = scalar(*context, context_where, "user");
  if (!user_name) return user_name.error();
  if (!*user_name || (*user_name)->empty()) {
    return malformed(source_, context_where + ".user is missing");
  }

  // The cluster: where, and whom to trust.
  auto cluster = named(root, "clusters", "cluster", **cluster_name);
  if (!cluster) return cluster.error();
  const std::string cw = "clusters[" + **cluster_name + "].cluster";
  auto insecure = scalar(*cluster, cw, "insecure-skip-tls-verify");
  if (!insecure) return insecure.error();
  if (*insecure) {
    bool skip = false;
    if (!YAML::convert<bool>::decode((*cluster)["insecure-skip-tls-verify"],
                                     skip)) {
      return malformed(source_, cw + ".insecure-skip-tls-verify is not true "
                                     "or false");
    }
    if (skip) {
      return malformed(
          source_,
          cw + ".insecure-skip-tls-verify is true; gpunode always verifies "
               "the API server's certificate and refuses to run without it",
          "remove insecure-skip-tls-verify and set certificate-authority-data "
          "(k3s's /etc/rancher/k3s/k3s.yaml has it)");
    }
  }
  auto server = scalar(*cluster, cw, "server");
  if (!server) return server.error();
  if (!*server || (*server)->empty()) {
    return malformed(source_, cw + ".server is missing");
  }
  config.server = **server;
  // A user name or password in the URL (https://user:pass@host) is never
  // sent (Kubernetes has no basic auth since 1.19) and would be printed in
  // every connection error: refused, and never echoed.
  if (const auto scheme = config.server.find("://");
      scheme != std::string::npos &&
      config.server
              .substr(scheme + 3,
                      config.server.find('/', scheme + 3) - (scheme + 3))
              .find('@') != std::string::npos) {
    return malformed(
        source_,
        cw + ".server carries a user name or password before '@' (not shown "
             "here); gpunode neither sends nor prints credentials in a URL",
        "remove 'USER:PASSWORD@' from the server URL; the API server takes "
        "the user entry's client certificate or token (k3s's "
        "/etc/rancher/k3s/k3s.yaml has them)");
  }
  while (config.server.size() > 8 && config.server.back() == '/') {
    config.server.pop_back();
  }
  if (config.server.rfind("https://", 0) != 0) {
    return malformed(source_, cw + ".server is \"" + config.server +
                                  "\"; only https:// servers are supported "
                                  "(the API server is always TLS)");
  }
  auto ca = data_or_file(*cluster, cw, "certificate-authority",
                         PemKind::kCertificate);
  if (!ca) return ca.error();
  if (!*ca) {
    return malformed(
        source_,
        cw + " has neither certificate-authority-data nor "
             "certificate-authority; gpunode needs the CA to verify the API "
             "server",
        "use the kubeconfig k3s writes (/etc/rancher/k3s/k3s.yaml), which "
        "embeds the CA");
  }
  config.ca_pem = std::move(**ca);

  // The user: a client certificate (k3s's admin) and/or a bearer token.
  auto user = named(root, "users", "user", **user_name);
  if (!user) return user.error();
  const std::string uw = "users[" + **user_name + "].user";
  auto cert =
      data_or_file(*user, uw, "client-certificate", PemKind::kCertificate);
  if (!cert) return cert.error();
  std::string key_file;
  auto key =
      data_or_file(*user, uw, "client-key", PemKind::kPrivateKey, &key_file);
  if (!key) return key.error();
  if (cert->has_value() != key->has_value()) {
    return malformed(
        source_,
        uw + (cert->has_value() ? " has a client certificate but no client key "
                                  "(client-key-data or client-key)"
                                : " has a client key but no client certificate "
                                  "(client-certificate-data or "
                                  "client-certificate)"));
  }
  if (*cert) {
    config.client_cert_pem = std::move(**cert);
    config.client_key_pem = std::move(**key);
    config.client_key_file = key_file;
  }

  auto token = scalar(*user, uw, "token");
  if (!token) return token.error();
  if (*token && !(*token)->empty()) {
    config.token = **token;
  } else {
    auto token_file = scalar(*user, uw, "tokenFile");
    if (!token_file) return token_file.error();
    if (*token_file && !(*token_file)->empty()) {
      const std::string path = resolve_relative(source_, **token_file);
      auto text = read_file_(path);
      if (!text) {
        Error e = text.error();
        e.layer = "kubeconfig";
        e.message = source_ + ": " + uw + ".tokenFile: " + e.message;
        return e;
      }
      std::string t = std::move(*text);
      while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) {
        t.pop_back();
      }
      if (t.empty()) {
        return malformed(source_, uw + ".tokenFile (" + path + ") is empty");
      }
      config.token = std::move(t);
      config.token_file = path;
    }
  }
  // A newline or other control character in a token would end up in an
  // HTTP header; refuse it instead of sending something odd.
  for (char c : config.token) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return malformed(source_, uw + " token contains control characters");
    }
  }

  if (config.client_cert_pem.empty() && config.token.empty()) {
    std::string why = uw + " has no credentials gpunode can use";
    if ((*user)["exec"].IsDefined() || (*user)["auth-provider"].IsDefined()) {
      why += " (exec and auth-provider plugins are not supported)";
    } else if ((*user)["username"].IsDefined()) {
      why += " (basic auth is not supported)";
    }
    return malformed(source_, why,
                     "use a kubeconfig with a client certificate "
                     "(client-certificate-data and client-key-data, as in "
                     "/etc/rancher/k3s/k3s.yaml) or a token");
  }
  return config;
}

}  // namespace

Result<Kubeconfig> parse_kubeconfig(const std::string& yaml,
                                    const std::string& source,
                                    const ReadFile& read_file) {
  try {
    YAML::Node root;
    try {
      root = YAML::Load(yaml);
    } catch (const YAML::ParserException& e) {
      return malformed(source, "is not valid YAML: " + e.msg + " (line " +
                                   std::to_string(e.mark.line + 1) + ")");
    }
    return Parser(source, read_file).parse(root);
  } catch (const YAML::Exception& e) {
    // A shape the checks above did not foresee (yaml-cpp throws on e.g. a
    // scalar indexed like a map): still the file's fault, still named.
    return malformed(source, "unexpected structure: " + e.msg);
  }
}

Result<Kubeconfig> load_kubeconfig(const FileSystem& fs,
                                   const std::string& host_path) {
  const auto info = fs.stat(host_path);
  if (!info) {
    return Error{ExitCode::kBlocked, "kubeconfig",
                 host_path + " does not exist",
                 "check the path; k3s writes /etc/rancher/k3s/k3s.yaml when "
                 "a server starts (sudo systemctl status k3s)"};
  }
  if (info->type == FileInfo::Type::kDirectory) {
    return malformed(host_path, "is a directory, not a kubeconfig file");
  }
  if (info->type != FileInfo::Type::kRegular) {
    return malformed(host_path, "is not a regular file");
  }
  if (info->size > kMaxKubeconfigBytes) {
    return malformed(host_path, "is larger than " +
                                    std::to_string(kMaxKubeconfigBytes) +
                                    " bytes; it is not a kubeconfig");
  }
  auto text = fs.read_file(host_path, kMaxKubeconfigBytes);
  if (!text) {
    // It exists and is a file, so failing to read it is almost always
    // permissions: k3s writes k3s.yaml with mode 0600 for root.
    return Error{ExitCode::kCannotRun, "kubeconfig", text.error().message,
                 "run gpunode as root (sudo); k3s writes " + host_path +
                     " readable by root only"};
  }
  auto config =
      parse_kubeconfig(*text, host_path, [&fs](const std::string& path) {
        return fs.read_file(path, kMaxReferencedFileBytes);
      });
  if (!config) return config;
  const bool key_inside =
      !config->client_key_pem.empty() && config->client_key_file.empty();
  const bool token_inside =
      !config->token.empty() && config->token_file.empty();
  if ((info->mode & 044) != 0 && (key_inside || token_inside)) {
    config->warnings.push_back(
        loose_kubeconfig_warning(host_path, info->mode, key_inside));
  }
  for (const auto& [file, key] : {std::pair{config->client_key_file, true},
                                  std::pair{config->token_file, false}}) {
    if (file.empty()) continue;
    const auto file_info = fs.stat(file);
    if (file_info && (file_info->mode & 044) != 0)
      config->warnings.push_back(
          loose_credential_file_warning(file, file_info->mode, host_path, key));
    if (file_info && file_info->uid != 0 && file_info->uid != info->uid)
      config->warnings.push_back(foreign_credential_file_warning(
          file, file_info->uid, host_path, key));
  }
  return config;
}

}  // namespace gpunode::kube
