// Kubeconfig loading: k3s's shape, general kubeconfigs, and every way a
// kubeconfig can be wrong, each named with the file and the key.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "gpunode/kube.hpp"
#include "gpunode/system_host.hpp"
#include "test_support.hpp"

using namespace gpunode;
using gpunode::test::TempDir;
using gpunode::test::write_text;

namespace {

const std::string kCa =
    "-----BEGIN CERTIFICATE-----\nMIIBcaCA\n-----END CERTIFICATE-----\n";
const std::string kCert =
    "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n";
const std::string kKey =
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIkey\n-----END EC PRIVATE "
    "KEY-----\n";
const std::string kSource = "/etc/rancher/k3s/k3s.yaml";

std::string b64(const std::string& in) { return gpunode::test::base64(in); }

// What k3s writes to /etc/rancher/k3s/k3s.yaml, with `cluster_extra` and
// `user_extra` lines added (already indented) and fields replaced.
std::string k3s_yaml(const std::string& cluster_extra = "",
                     const std::string& user_extra = "", std::string ca = "",
                     std::string cert = "", std::string key = "") {
  if (ca.empty()) ca = b64(kCa);
  if (cert.empty()) cert = b64(kCert);
  if (key.empty()) key = b64(kKey);
  return gpunode::test::k3s_kubeconfig("https://127.0.0.1:6443", ca, cert, key,
                                       cluster_extra, user_extra);
}

// Files a kubeconfig may point at, for parse_kubeconfig.
struct Files {
  std::map<std::string, std::string> content;
  std::vector<std::string> asked;
  Result<std::string> operator()(const std::string& path) {
    asked.push_back(path);
    auto it = content.find(path);
    if (it == content.end()) {
      return Error{ExitCode::kUsage,
                   "file",
                   "cannot read " + path + ": No such file or directory",
                   {}};
    }
    return it->second;
  }
};

Result<kube::Kubeconfig> parse(const std::string& yaml, Files& files,
                               const std::string& source = kSource) {
  return kube::parse_kubeconfig(
      yaml, source, [&files](const std::string& p) { return files(p); });
}

Result<kube::Kubeconfig> parse(const std::string& yaml) {
  Files none;
  return parse(yaml, none);
}

void require_usage_error(const Result<kube::Kubeconfig>& r,
                         const std::string& fragment) {
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
  CHECK(r.error().layer == "kubeconfig");
  CHECK_THAT(r.error().message, Catch::Contains(fragment));
}

// A file system whose kubeconfig exists but cannot be read: the 0600
// k3s.yaml seen by a non-root user (tests run as root, so a real chmod
// would not stop them).
class UnreadableFs : public FileSystem {
 public:
  std::string resolve(const std::string& p) const override { return p; }
  std::optional<FileInfo> stat(const std::string&) const override {
    FileInfo info;
    info.type = FileInfo::Type::kRegular;
    info.size = 2000;
    info.mode = 0600;
    return info;
  }
  Result<std::string> read_file(const std::string& p,
                                std::size_t) const override {
    return Error{ExitCode::kUsage,
                 "file",
                 "cannot read " + p + ": Permission denied",
                 {}};
  }
  bool is_executable_file(const std::string&) const override { return false; }
  std::vector<std::string> list_dir(const std::string&) const override {
    return {};
  }
  Result<void> create_directories(const std::string&) override { return {}; }
  Result<void> write_file_atomic(const std::string&, const std::string&,
                                 unsigned) override {
    return {};
  }
};

}  // namespace

TEST_CASE("k3s's kubeconfig: embedded CA, client certificate and key",
          "[kube]") {
  TempDir t;
  write_text(t.path() + kSource, k3s_yaml(), 0600);
  auto fs = make_rooted_file_system(t.path());
  auto config = kube::load_kubeconfig(*fs, kSource);
  REQUIRE(config);
  CHECK(config->source == kSource);
  CHECK(config->context == "default");
  CHECK(config->server == "https://127.0.0.1:6443");
  CHECK(config->ca_pem == kCa);
  CHECK(config->client_cert_pem == kCert);
  CHECK(config->client_key_pem == kKey);
  CHECK(config->token.empty());
}

TEST_CASE("base64 wrapped over several lines still decodes", "[kube]") {
  // A YAML block scalar keeps line breaks; they are not part of the data.
  std::string wrapped = b64(kCa);
  wrapped.insert(20, "\n      ");
  const std::string yaml = k3s_yaml("", "", "|\n      " + wrapped);
  auto config = parse(yaml);
  REQUIRE(config);
  CHECK(config->ca_pem == kCa);
}

TEST_CASE("general kubeconfig: file references, relative to its folder",
          "[kube]") {
  TempDir t;
  const std::string yaml =
      "apiVersion: v1\n"
      "kind: Config\n"
      "current-context: ops\n"
      "clusters:\n"
      "- name: prod\n"
      "  cluster:\n"
      "    server: https://10.0.0.1:6443/\n"
      "    certificate-authority: ca.crt\n"
      "users:\n"
      "- name: admin\n"
      "  user:\n"
      "    client-certificate: /srv/pki/admin.crt\n"
      "    client-key: ../keys/admin.key\n"
      "contexts:\n"
      "- name: ops\n"
      "  context: {cluster: prod, user: admin, namespace: kube-system}\n";
  write_text(t.path() + "/home/op/.kube/config", yaml);
  write_text(t.path() + "/home/op/.kube/ca.crt", kCa);
  write_text(t.path() + "/srv/pki/admin.crt", kCert);
  write_text(t.path() + "/home/op/keys/admin.key", kKey, 0600);
  auto fs = make_rooted_file_system(t.path());
  auto config = kube::load_kubeconfig(*fs, "/home/op/.kube/config");
  REQUIRE(config);
  CHECK(config->context == "ops");
  CHECK(config->server == "https://10.0.0.1:6443");  // trailing '/' dropped
  CHECK(config->ca_pem == kCa);
  CHECK(config->client_cert_pem == kCert);
  CHECK(config->client_key_pem == kKey);
}

TEST_CASE("relative references resolve against the kubeconfig's folder",
          "[kube]") {
  Files files;
  files.content["/a/b/ca.crt"] = kCa;
  files.content["/a/b/../tok"] = "s3cret\n";  // the file system resolves ".."
  const std::string yaml =
      "clusters: [{name: c, cluster: {server: 'https://h:6443', "
      "certificate-authority: ca.crt}}]\n"
      "users: [{name: u, user: {tokenFile: ../tok}}]\n"
      "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
      "current-context: x\n";
  auto config = parse(yaml, files, "/a/b/kubeconfig");
  REQUIRE(config);
  CHECK(files.asked == std::vector<std::string>{"/a/b/ca.crt", "/a/b/../tok"});
  CHECK(config->token == "s3cret");  // the trailing newline is not the token
  CHECK(config->client_cert_pem.empty());
}

TEST_CASE("bearer token, inline", "[kube]") {
  const std::string yaml =
      "clusters: [{name: c, cluster: {server: 'https://h:6443', "
      "certificate-authority-data: " +
      b64(kCa) +
      "}}]\n"
      "users: [{name: u, user: {token: abc.def}}]\n"
      "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
      "current-context: x\n";
  auto config = parse(yaml);
  REQUIRE(config);
  CHECK(config->token == "abc.def");
  CHECK(config->client_key_pem.empty());
}

TEST_CASE("current-context picks cluster and user among several", "[kube]") {
  const std::string ca = b64(kCa);
  const std::string yaml =
      "clusters:\n"
      "- {name: one, cluster: {server: 'https://one:6443', "
      "certificate-authority-data: " +
      ca +
      "}}\n"
      "- {name: two, cluster: {server: 'https://two:6443', "
      "certificate-authority-data: " +
      ca +
      "}}\n"
      "users:\n"
      "- {name: u1, user: {token: t1}}\n"
      "- {name: u2, user: {token: t2}}\n"
      "contexts:\n"
      "- {name: a, context: {cluster: one, user: u1}}\n"
      "- {name: b, context: {cluster: two, user: u2}}\n";
  SECTION("the named one") {
    auto config = parse(yaml + "current-context: b\n");
    REQUIRE(config);
    CHECK(config->context == "b");
    CHECK(config->server == "https://two:6443");
    CHECK(config->token == "t2");
  }
  SECTION("unset with two contexts is an error") {
    require_usage_error(parse(yaml), "current-context is not set");
  }
  SECTION("an unknown one is named, with the ones there are") {
    require_usage_error(
        parse(yaml + "current-context: prod\n"),
        kSource +
            ": context \"prod\" is not defined in contexts (it has: a, b)");
  }
}

TEST_CASE("unset current-context with exactly one context uses it", "[kube]") {
  std::string yaml = k3s_yaml();
  yaml.replace(yaml.find("current-context: default\n"),
               std::string("current-context: default\n").size(), "");
  auto config = parse(yaml);
  REQUIRE(config);
  CHECK(config->context == "default");
}

TEST_CASE("bad kubeconfigs are named with file, key and error class",
          "[kube]") {
  SECTION("not YAML") {
    require_usage_error(parse("clusters: [unclosed\n  - {"),
                        kSource + ": is not valid YAML");
  }
  SECTION("YAML but not a kubeconfig") {
    require_usage_error(parse("just a string\n"), "is not a kubeconfig");
  }
  SECTION("bad base64") {
    require_usage_error(
        parse(k3s_yaml("", "", "", "", "not*base64!")),
        "/etc/rancher/k3s/k3s.yaml: users[default].user.client-key-data is "
        "not valid base64");
  }
  SECTION("bad padding") {
    require_usage_error(parse(k3s_yaml("", "", "QUJD=QUJD")),
                        "clusters[default].cluster.certificate-authority-data "
                        "is not valid base64");
  }
  SECTION("base64 of something that is not PEM") {
    require_usage_error(parse(k3s_yaml("", "", "", b64("\x30\x82\x01\x0a"))),
                        "users[default].user.client-certificate-data is not a "
                        "PEM certificate");
  }
  SECTION("a certificate where the key belongs") {
    require_usage_error(parse(k3s_yaml("", "", "", "", b64(kCert))),
                        "users[default].user.client-key-data is PEM but holds "
                        "no private key");
  }
  SECTION("an encrypted key") {
    const std::string enc =
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMII\n-----END ENCRYPTED "
        "PRIVATE KEY-----\n";
    require_usage_error(parse(k3s_yaml("", "", "", "", b64(enc))),
                        "is an encrypted private key");
  }
  SECTION("missing CA") {
    std::string yaml = k3s_yaml();
    const auto at = yaml.find("    certificate-authority-data:");
    yaml.erase(at, yaml.find('\n', at) - at + 1);
    auto r = parse(yaml);
    require_usage_error(r,
                        "clusters[default].cluster has neither "
                        "certificate-authority-data nor certificate-authority");
  }
  SECTION("missing server") {
    std::string yaml = k3s_yaml();
    const auto at = yaml.find("    server:");
    yaml.erase(at, yaml.find('\n', at) - at + 1);
    require_usage_error(
        parse(yaml), kSource + ": clusters[default].cluster.server is missing");
  }
  SECTION("plain http server") {
    std::string yaml = k3s_yaml();
    yaml.replace(yaml.find("https://"), 8, "http://");
    require_usage_error(parse(yaml), "only https:// servers are supported");
  }
  // Regression (independent try of issue 26): the password in
  // https://user:pass@host was printed in every connection error.
  SECTION("a password in the server URL is refused and never echoed") {
    for (const char* scheme : {"https://", "http://"}) {
      std::string yaml = k3s_yaml();
      yaml.replace(yaml.find("https://"), 8,
                   std::string(scheme) + "admin:S3cretPassw0rd@");
      auto r = parse(yaml);
      require_usage_error(r,
                          "clusters[default].cluster.server carries a user "
                          "name or password before '@'");
      CHECK(r.error().message.find("S3cret") == std::string::npos);
      CHECK(r.error().fix.find("S3cret") == std::string::npos);
      CHECK_THAT(r.error().fix, Catch::Contains("remove 'USER:PASSWORD@'"));
    }
  }
  SECTION("an '@' in the server's path is not a user name") {
    std::string yaml = k3s_yaml();
    const auto at = yaml.find("https://");
    const auto eol = yaml.find('\n', at);
    yaml.insert(eol, "/k8s/@proxy");
    CHECK(parse(yaml).ok());
  }
  SECTION("insecure-skip-tls-verify is refused") {
    auto r = parse(k3s_yaml("    insecure-skip-tls-verify: true\n"));
    require_usage_error(r,
                        "clusters[default].cluster.insecure-skip-tls-verify is "
                        "true; gpunode always verifies");
    CHECK_THAT(r.error().fix, Catch::Contains("certificate-authority-data"));
  }
  SECTION("insecure-skip-tls-verify: false is fine") {
    CHECK(parse(k3s_yaml("    insecure-skip-tls-verify: false\n")).ok());
  }
  SECTION("certificate without key") {
    std::string yaml = k3s_yaml();
    const auto at = yaml.find("    client-key-data:");
    yaml.erase(at, yaml.find('\n', at) - at + 1);
    require_usage_error(parse(yaml),
                        "users[default].user has a client certificate but no "
                        "client key");
  }
  SECTION("only an exec plugin") {
    const std::string yaml =
        "clusters: [{name: c, cluster: {server: 'https://h:6443', "
        "certificate-authority-data: " +
        b64(kCa) +
        "}}]\n"
        "users: [{name: u, user: {exec: {command: aws}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n";
    require_usage_error(parse(yaml),
                        "users[u].user has no credentials gpunode can use "
                        "(exec and auth-provider plugins are not supported)");
  }
  SECTION("a referenced file that is missing") {
    Files files;
    const std::string yaml =
        "clusters: [{name: c, cluster: {server: 'https://h:6443', "
        "certificate-authority: /etc/k/ca.crt}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "current-context: x\n";
    require_usage_error(parse(yaml, files),
                        kSource +
                            ": clusters[c].cluster.certificate-authority: "
                            "cannot read /etc/k/ca.crt");
  }
  SECTION("a context naming a cluster that is not there") {
    std::string yaml = k3s_yaml();
    yaml.replace(yaml.find("    cluster: default"), 20, "    cluster: gone");
    require_usage_error(parse(yaml),
                        "cluster \"gone\" is not defined in clusters (it has: "
                        "default)");
  }
  SECTION("a string where a list belongs") {
    require_usage_error(
        parse("clusters: nope\ncontexts: [{name: x, context: {cluster: c, "
              "user: u}}]\ncurrent-context: x\n"),
        "clusters is not a list");
  }
  SECTION("a map where a string belongs") {
    std::string yaml = k3s_yaml();
    yaml.replace(yaml.find("server: https://127.0.0.1:6443"),
                 std::string("server: https://127.0.0.1:6443").size(),
                 "server: {url: x}");
    require_usage_error(parse(yaml),
                        "clusters[default].cluster.server is not a string");
  }
}

TEST_CASE("loading: missing, a directory, unreadable", "[kube]") {
  TempDir t;
  auto fs = make_rooted_file_system(t.path());
  SECTION("missing: k3s not started, or a typo") {
    auto r = kube::load_kubeconfig(*fs, kSource);
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == ExitCode::kBlocked);
    CHECK_THAT(r.error().message, Catch::Contains(kSource + " does not exist"));
    // The loader's own fix is neutral (run/cluster_facts.cpp fits it to
    // the path and the scope): never "copy the admin's to this node"
    // (the independent try of issue 25).
    CHECK_THAT(r.error().fix, Catch::Contains("check the path"));
    CHECK(r.error().fix.find("copied from a server") == std::string::npos);
  }
  SECTION("a directory") {
    write_text(t.path() + kSource + "/x", "");
    auto r = kube::load_kubeconfig(*fs, kSource);
    require_usage_error(r, kSource + ": is a directory");
  }
  SECTION("unreadable: not root") {
    UnreadableFs unreadable;
    auto r = kube::load_kubeconfig(unreadable, kSource);
    REQUIRE_FALSE(r);
    CHECK(r.error().exit == ExitCode::kCannotRun);
    CHECK_THAT(r.error().message, Catch::Contains("Permission denied"));
    CHECK_THAT(r.error().fix, Catch::Contains("sudo"));
  }
}

TEST_CASE("two clusters, users or contexts of one name are refused", "[kube]") {
  // kubectl refuses these (client-go clientcmd/api/v1/conversion.go:
  // "duplicate name ... in list"); which entry is meant would be a guess.
  const std::string yaml = k3s_yaml();
  struct Case {
    const char* list;
    std::string entry;
  };
  const std::vector<Case> cases = {
      {"clusters", "- name: default\n  cluster:\n    server: https://x:1\n"},
      {"users", "- name: default\n  user:\n    token: t\n"},
      {"contexts",
       "- name: default\n  context: {cluster: default, user: default}\n"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.list) {
      std::string doubled = yaml;
      const std::string head = std::string(c.list) + ":\n";
      doubled.insert(doubled.find(head) + head.size(), c.entry);
      auto r = parse(doubled);
      require_usage_error(
          r, std::string(c.list) + " has two entries named \"default\"");
      CHECK_THAT(r.error().message, Catch::StartsWith(kSource));
      CHECK_THAT(r.error().fix, Catch::Contains("rename or remove"));
    }
  }
  SECTION("the same name in different lists is fine") { CHECK(parse(yaml)); }
}

TEST_CASE("a kubeconfig with credentials readable by others is a warning",
          "[kube]") {
  TempDir t;
  auto warnings_at = [&](unsigned mode) {
    write_text(t.path() + kSource, k3s_yaml(), mode);
    auto config =
        kube::load_kubeconfig(*make_rooted_file_system(t.path()), kSource);
    REQUIRE(config);
    return config->warnings;
  };
  SECTION("0644, as k3s --write-kubeconfig-mode 644 writes it") {
    const auto warnings = warnings_at(0644);
    REQUIRE(warnings.size() == 1);
    const std::string& w = warnings[0];
    CHECK_THAT(w, Catch::Contains("readable by every local user (mode 0644)"));
    CHECK_THAT(w, Catch::Contains("client key"));
    CHECK_THAT(w, Catch::Contains("the cluster admin's"));
    CHECK_THAT(w, Catch::Contains("chmod 600 " + kSource));
    CHECK_THAT(w, Catch::Contains("write-kubeconfig-mode: \"0600\""));
  }
  SECTION("0640: its group") {
    const auto warnings = warnings_at(0640);
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Catch::Contains("readable by its group"));
  }
  SECTION("0600: nothing to say") { CHECK(warnings_at(0600).empty()); }
}

TEST_CASE(
    "the kubelet's kubeconfig names files: it is no secret at 0644, but a "
    "client-kubelet.key others can read is a warning",
    "[kube]") {
  TempDir t;
  const std::string dir = "/var/lib/rancher/k3s/agent";
  const std::string source = dir + "/kubelet.kubeconfig";
  const std::string key = dir + "/client-kubelet.key";
  // k3s's deps.KubeConfig shape: paths, not data (as test/support/k3s_sim).
  write_text(t.path() + source,
             "apiVersion: v1\nclusters:\n- cluster:\n    server: "
             "https://127.0.0.1:6444\n    certificate-authority: " +
                 dir +
                 "/server-ca.crt\n  name: local\ncontexts:\n- context:\n"
                 "    cluster: local\n    user: user\n  name: Default\n"
                 "current-context: Default\nusers:\n- name: user\n  user:\n"
                 "    client-certificate: " +
                 dir + "/client-kubelet.crt\n    client-key: " + key + "\n",
             0644);
  write_text(t.path() + dir + "/server-ca.crt", kCa, 0644);
  write_text(t.path() + dir + "/client-kubelet.crt", kCert, 0644);
  auto warnings_at = [&](unsigned key_mode) {
    write_text(t.path() + key, kKey, key_mode);
    auto config =
        kube::load_kubeconfig(*make_rooted_file_system(t.path()), source);
    REQUIRE(config);
    CHECK(config->client_key_file == key);
    return config->warnings;
  };
  SECTION("the key 0600, as k3s writes it: nothing to say") {
    CHECK(warnings_at(0600).empty());
  }
  SECTION("the key 0600 but owned by another user: a warning (chown)") {
    // Only root can give a file away; the tests run as root.
    if (::geteuid() == 0) {
      write_text(t.path() + key, kKey, 0600);
      REQUIRE(::chown((t.path() + key).c_str(), 65534, 65534) == 0);
      auto config =
          kube::load_kubeconfig(*make_rooted_file_system(t.path()), source);
      REQUIRE(config);
      REQUIRE(config->warnings.size() == 1);
      const std::string& w = config->warnings[0];
      CHECK_THAT(w, Catch::StartsWith(key +
                                      " is owned by uid 65534, neither "
                                      "root nor the owner of " +
                                      source + ", and is the client key"));
      CHECK_THAT(w, Catch::Contains("as this node"));
      CHECK_THAT(w, Catch::EndsWith("Fix: chown root " + key +
                                    " && chmod 600 " + key));
      // Owned by the kubeconfig's owner: that user may read it.
      REQUIRE(::chown((t.path() + source).c_str(), 65534, 65534) == 0);
      auto same =
          kube::load_kubeconfig(*make_rooted_file_system(t.path()), source);
      REQUIRE(same);
      CHECK(same->warnings.empty());
    } else {
      WARN("not root: cannot give the key to another user; not checked");
    }
  }
  for (const auto& [mode, who] : std::vector<std::pair<unsigned, std::string>>{
           {0644, "every local user (mode 0644)"},
           {0640, "its group (mode 0640)"}}) {
    DYNAMIC_SECTION("the key " << who) {
      const auto warnings = warnings_at(mode);
      REQUIRE(warnings.size() == 1);
      const std::string& w = warnings[0];
      CHECK_THAT(
          w, Catch::StartsWith(key + " is readable by " + who +
                               " and is the client key " + source + " names"));
      CHECK_THAT(w, Catch::Contains("as this node"));
      CHECK_THAT(w, Catch::EndsWith("Fix: chmod 600 " + key));
      CHECK_THAT(w, !Catch::Contains("admin"));
      CHECK_THAT(w, !Catch::Contains("k3s.yaml"));
    }
  }
}

// Regression (independent try of issue 26): a malformed kubeconfig's error
// had no fix line.
TEST_CASE("a malformed kubeconfig's error says where to look", "[kube]") {
  auto config = parse("clusters: [unclosed\n  - {");
  REQUIRE_FALSE(config);
  CHECK(config.error().fix ==
        "kubectl --kubeconfig " + kSource +
            " config view shows what is wrong with it; or give --kubeconfig "
            "the cluster's (on a k3s server: /etc/rancher/k3s/k3s.yaml)");
}

// Regression (independent try of issue 26): a path with a space went into
// the fix's command line as two words.
TEST_CASE("a malformed kubeconfig's fix quotes a path with a space", "[kube]") {
  Files none;
  auto config = parse("clusters: [unclosed\n  - {", none, "/root/my k.yaml");
  REQUIRE_FALSE(config);
  CHECK_THAT(config.error().fix,
             Catch::StartsWith("kubectl --kubeconfig '/root/my k.yaml' "
                               "config view"));
}
