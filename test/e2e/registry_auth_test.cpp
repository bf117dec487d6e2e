// Pulls from registries that want credentials: Debian's docker-registry
// with htpasswd auth (a 401 "Basic" challenge) and with token auth (a 401
// "Bearer" challenge answered by test/sim/token_server.py, which checks
// Basic credentials and signs JWTs the registry verifies), the credentials
// given through --registry-auth or the default auth files. Without
// credentials or with a wrong password the pull is exit 1 naming what to
// do; the password appears in no output and no file of the bundle. (That
// no Authorization follows a redirect to another host is in
// test/unit/registry_pull_test.cpp: docker-registry's filesystem storage
// never redirects.)
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "gpunode/base64.hpp"
#include "gpunode/registry_pull.hpp"
#include "oci_builder.hpp"
#include "registry_fixture.hpp"
#include "test_support.hpp"

namespace gpunode::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRepoTag = "nvidia/k8s-device-plugin:v0.19.3";

#define REQUIRE_REGISTRY()                                             \
  if (!registry_available()) {                                         \
    FAIL(                                                              \
        "the registry tests need Debian's docker-registry and skopeo " \
        "(scripts/setup.sh)");                                         \
  }

std::string auth_file(const TempDir& tmp, const std::string& name,
                      const std::string& host, const std::string& user,
                      const std::string& password) {
  const std::string path = tmp.path() + "/" + name;
  write_text(path,
             "{\"auths\": {\"" + host + "\": {\"auth\": \"" +
                 encode_base64(user + ":" + password) + "\"}}}\n",
             0600);
  return path;
}

// Every file under `dir` (the bundle) that holds `needle`.
std::vector<std::string> files_holding(const std::string& dir,
                                       const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    if (read_text(e.path().string()).find(needle) != std::string::npos)
      out.push_back(e.path().string());
  }
  return out;
}

// No entry but the ones named is left in `dir`.
std::size_t entries_in(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

// Pulls with and without credentials from `registry`, checking what each
// gives. `scheme` is the challenge the registry sends, for the message.
void check_authenticated_pulls(Registry& registry) {
  TempDir tmp;
  const BuiltImage built = build_image(tmp.path() + "/src.tar", ImageSpec{});
  registry.push(built.path, kRepoTag);
  const std::string ref = registry.host() + "/" + kRepoTag;
  const std::string& password = registry.auth().password;
  const std::string good = auth_file(tmp, "good.json", registry.host(),
                                     registry.auth().user, password);
  const std::string wrong = auth_file(tmp, "wrong.json", registry.host(),
                                      registry.auth().user, "not-" + password);
  const std::string out = tmp.path() + "/bundle";
  // An empty HOME and XDG dirs: the developer's own auth files stay out.
  const std::vector<std::string> env = {
      "HOME=" + tmp.path(), "XDG_RUNTIME_DIR=" + tmp.path() + "/run",
      "XDG_CONFIG_HOME=" + tmp.path() + "/cfg", "REGISTRY_AUTH_FILE="};

  SECTION("without credentials: exit 1, naming --registry-auth") {
    Run c = run_gpunode({"bundle", "create", "--out", out, "--pull", ref,
                         "--insecure-registry"},
                        env);
    INFO(c.err);
    CHECK(c.exit_code == 1);
    CHECK_THAT(c.err, Catch::Contains(registry.host() + " wants credentials") &&
                          Catch::Contains("--registry-auth"));
    CHECK_FALSE(fs::exists(out));
    CHECK(entries_in(tmp.path()) == 3);  // src.tar, good.json, wrong.json
  }

  SECTION(
      "an auth file with only credsStore: exit 1, naming the helper, not "
      "'none were given'") {
    const std::string store = tmp.path() + "/store.json";
    write_text(store, "{\"credsStore\": \"desktop\"}\n", 0600);
    Run c = run_gpunode({"bundle", "create", "--out", out, "--pull", ref,
                         "--insecure-registry", "--registry-auth", store},
                        env);
    INFO(c.err);
    CHECK(c.exit_code == 1);
    CHECK_THAT(c.err, Catch::Contains(registry.host() + " wants credentials") &&
                          Catch::Contains(
                              store + " names the credential helper "
                                      "docker-credential-desktop (credsStore), "
                                      "which gpunode does not run") &&
                          Catch::Contains("podman login --authfile FILE") &&
                          !Catch::Contains("none were given"));
    CHECK_FALSE(fs::exists(out));
    CHECK(entries_in(tmp.path()) == 4);  // and store.json
  }

  SECTION("a wrong password: exit 1, naming the user, never the password") {
    Run c = run_gpunode({"bundle", "create", "--out", out, "--pull", ref,
                         "--insecure-registry", "--registry-auth", wrong},
                        env);
    INFO(c.err);
    CHECK(c.exit_code == 1);
    CHECK_THAT(c.err,
               Catch::Contains("refused the credentials for " +
                               registry.auth().user + "@" + registry.host()) &&
                   Catch::Contains(wrong));
    CHECK_THAT(c.err + c.out, !Catch::Contains(password));
    CHECK_FALSE(fs::exists(out));
    CHECK(entries_in(tmp.path()) == 3);
  }

  SECTION("the right credentials: the bundle verifies and holds no secret") {
    Run c = run_gpunode(
        {"bundle", "create", "--out", out, "--pull", ref, "--insecure-registry",
         "--registry-auth", good, "--created", "2026-12-02T10:00:00Z"},
        env);
    INFO(c.err);
    REQUIRE(c.exit_code == 0);
    CHECK_THAT(c.err, Catch::Contains(built.index_digest));
    CHECK_THAT(c.err + c.out,
               !Catch::Contains(password) && !Catch::Contains(good) &&
                   !Catch::Contains(
                       encode_base64(registry.auth().user + ":" + password)));
    CHECK(files_holding(out, password).empty());
    CHECK(
        files_holding(out, encode_base64(registry.auth().user + ":" + password))
            .empty());
    CHECK(files_holding(out, "good.json").empty());
    CHECK_THAT(c.err, !Catch::Contains("readable by other users"));  // 0600
    Run v = run_gpunode(
        {"bundle", "verify", out, "--insecure-skip-signature", "--json"});
    INFO(v.err);
    CHECK(v.exit_code == 0);
    CHECK_THAT(v.out + v.err, !Catch::Contains(password));
  }

  SECTION("a malformed file or a helper's entry: exit 2, before any pull") {
    const std::string bad = tmp.path() + "/bad.json";
    write_text(bad, "{\"auths\": {\"" + registry.host() + "\": {\"auth\": \"" +
                        password + "\"}}}");
    const std::string helper = tmp.path() + "/helper.json";
    write_text(helper, "{\"credHelpers\": {\"" + registry.host() +
                           "\": \"secretservice\"}}");
    for (const auto& [file, says] :
         {std::pair<std::string, std::string>{bad, "not base64"},
          {helper, "docker-credential-secretservice"}}) {
      Run c = run_gpunode({"bundle", "create", "--out", out, "--pull", ref,
                           "--insecure-registry", "--registry-auth", file},
                          env);
      INFO(c.err);
      CHECK(c.exit_code == 2);
      CHECK_THAT(c.err, Catch::Contains(file) && Catch::Contains(says) &&
                            !Catch::Contains(password));
      CHECK_FALSE(fs::exists(out));
    }
  }

  SECTION("the default auth file is found ($XDG_RUNTIME_DIR first)") {
    fs::create_directories(tmp.path() + "/run/containers");
    fs::copy_file(good, tmp.path() + "/run/containers/auth.json");
    // Readable by others: pulled all the same, with a note to chmod it.
    fs::permissions(tmp.path() + "/run/containers/auth.json",
                    fs::perms::others_read, fs::perm_options::add);
    // A wrong one later in the order is not reached.
    fs::create_directories(tmp.path() + "/.docker");
    fs::copy_file(wrong, tmp.path() + "/.docker/config.json");
    Run c = run_gpunode({"bundle", "create", "--out", out, "--pull", ref,
                         "--insecure-registry"},
                        env);
    INFO(c.err);
    CHECK(c.exit_code == 0);
    CHECK(fs::exists(out + "/bundle.toml"));
    CHECK_THAT(c.err, Catch::Contains("auth.json holds registry passwords and "
                                      "is readable by other users"));
  }
}

}  // namespace

TEST_CASE("an htpasswd registry (Basic) pulls with credentials only",
          "[e2e][registry][registry-auth]") {
  REQUIRE_REGISTRY();
  RegistryAuth auth;
  auth.kind = RegistryAuth::Kind::kHtpasswd;
  Registry registry(false, auth);
  check_authenticated_pulls(registry);
}

TEST_CASE("a token-auth registry (Bearer) pulls with credentials only",
          "[e2e][registry][registry-auth]") {
  REQUIRE_REGISTRY();
  RegistryAuth auth;
  auth.kind = RegistryAuth::Kind::kToken;
  Registry registry(false, auth);
  check_authenticated_pulls(registry);
  // The token service saw our user (the pushes and the good pulls), and
  // refused the wrong password; the log shows only names.
  CHECK_THAT(registry.token_log(), Catch::Contains("token " + auth.user) &&
                                       !Catch::Contains(auth.password));
}

TEST_CASE(
    "credentials are not sent to a plain-HTTP token service without "
    "--insecure-registry",
    "[e2e][registry][registry-auth]") {
  REQUIRE_REGISTRY();
  // An HTTPS registry whose challenge names an http:// realm.
  RegistryAuth auth;
  auth.kind = RegistryAuth::Kind::kToken;
  Registry registry(/*tls=*/true, auth);
  TempDir tmp;
  bundle::PullOptions pull;
  pull.ref = registry.host() + "/" + kRepoTag;
  pull.out_path = tmp.path() + "/pulled.tar";
  pull.ca_file = registry.ca_file();
  bundle::RegistryCredentials c;
  c.username = auth.user;
  c.password = auth.password;
  c.source = "test";
  pull.credentials = c;
  auto r = bundle::pull_to_oci_archive(pull);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kBlocked);
  CHECK_THAT(r.error().message, Catch::Contains("is not HTTPS") &&
                                    !Catch::Contains(auth.password));
  CHECK(registry.token_log().empty());  // nothing reached it
  CHECK_FALSE(fs::exists(pull.out_path));
}

}  // namespace gpunode::test
