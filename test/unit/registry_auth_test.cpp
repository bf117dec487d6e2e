// Registry auth files (containers-auth.json(5)): parsing, each malformed
// file refused as a usage error that never shows the secret, the key
// matching (most specific namespace first, Docker Hub's spellings, URL
// keys), credential helpers refused by name, and the default places in
// containers-auth.json(5)'s order.
#include "gpunode/registry_auth.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>

#include "gpunode/base64.hpp"
#include "test_support.hpp"

namespace gpunode::test {
namespace {

using bundle::AuthFile;
using bundle::credentials_for;
using bundle::parse_auth_file;

std::string auth(const std::string& user_pass) {
  return encode_base64(user_pass);
}

AuthFile parsed(const std::string& text) {
  auto f = parse_auth_file("/x/auth.json", text);
  INFO((f ? "" : f.error().message));
  REQUIRE(f);
  return *f;
}

// The user the file gives for `ref`; "" when anonymous.
std::string user_for(const std::vector<AuthFile>& files,
                     const std::string& ref) {
  auto c = credentials_for(files, ref);
  INFO((c ? "" : c.error().message));
  REQUIRE(c);
  return *c ? (*c)->username : "";
}

bundle::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace

TEST_CASE("base64 encodes as RFC 4648 says and decodes back",
          "[unit][registry-auth]") {
  // RFC 4648 section 10's test vectors.
  const std::pair<const char*, const char*> vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, coded] : vectors) {
    CHECK(encode_base64(plain) == coded);
    if (*plain) CHECK(decode_base64(coded) == std::string(plain));
  }
}

TEST_CASE("an auth entry gives the user and password, auth or spelled out",
          "[unit][registry-auth]") {
  const AuthFile f = parsed(
      "{\"auths\": {\"nvcr.io\": {\"auth\": \"" + auth("$oauthtoken:k:e:y") +
      "\"}, \"harbor.example.com\": {\"username\": \"robot$ci\", "
      "\"password\": \"pw\"}}}");
  auto nv = credentials_for({f}, "nvcr.io/nvidia/k8s-device-plugin:v0.19.3");
  REQUIRE(nv);
  REQUIRE(*nv);
  CHECK((*nv)->username == "$oauthtoken");
  CHECK((*nv)->password == "k:e:y");  // the first colon splits
  CHECK((*nv)->source == "/x/auth.json (key \"nvcr.io\")");
  auto h = credentials_for({f}, "harbor.example.com/nvidia/x:1");
  REQUIRE(h);
  REQUIRE(*h);
  CHECK((*h)->username == "robot$ci");
  CHECK((*h)->password == "pw");
  // No entry: anonymous.
  CHECK(user_for({f}, "ghcr.io/a/b:1").empty());
  CHECK(user_for({}, "nvcr.io/a/b:1").empty());
}

TEST_CASE("the most specific repository namespace wins, then the host",
          "[unit][registry-auth]") {
  const AuthFile f = parsed(
      "{\"auths\": {"
      "\"reg.example.com\": {\"auth\": \"" +
      auth("host:p") + "\"}, \"reg.example.com/team\": {\"auth\": \"" +
      auth("team:p") + "\"}, \"reg.example.com/team/sub/img\": {\"auth\": \"" +
      auth("img:p") + "\"}, \"reg.example.com:5000\": {\"auth\": \"" +
      auth("port:p") + "\"}}}");
  CHECK(user_for({f}, "reg.example.com/team/sub/img:1") == "img");
  CHECK(user_for({f}, "reg.example.com/team/sub/other:1") == "team");
  CHECK(user_for({f}, "reg.example.com/team/img:1") == "team");
  // A namespace key matches whole path components only.
  CHECK(user_for({f}, "reg.example.com/teamster/img:1") == "host");
  CHECK(user_for({f}, "reg.example.com/other:1") == "host");
  // The port is part of the host.
  CHECK(user_for({f}, "reg.example.com:5000/team/img:1") == "port");
  CHECK(user_for({f}, "reg.example.com:5001/team/img:1").empty());
}

TEST_CASE("URL keys and Docker Hub's spellings match their host",
          "[unit][registry-auth]") {
  // docker login writes Hub's key as its v1 API URL; old versions wrote
  // other registries as URLs too.
  const AuthFile docker = parsed(
      "{\"auths\": {\"https://index.docker.io/v1/\": {\"auth\": \"" +
      auth("hub:p") + "\"}, \"https://old.example.com/v2/\": {\"auth\": \"" +
      auth("old:p") + "\"}}}");
  CHECK(user_for({docker}, "nvidia/cuda:12.5.0") == "hub");
  CHECK(user_for({docker}, "docker.io/nvidia/cuda:12.5.0") == "hub");
  CHECK(user_for({docker}, "registry-1.docker.io/nvidia/cuda:1") == "hub");
  CHECK(user_for({docker}, "old.example.com/a/b:1") == "old");
  // A URL key names a registry, never a namespace: its path is dropped.
  const AuthFile url_path =
      parsed("{\"auths\": {\"https://r.example.com/team\": {\"auth\": \"" +
             auth("url:p") + "\"}}}");
  CHECK(user_for({url_path}, "r.example.com/other/x:1") == "url");
  // A plain key beats a URL key for the same host.
  const AuthFile both =
      parsed("{\"auths\": {\"https://index.docker.io/v1/\": {\"auth\": \"" +
             auth("url:p") + "\"}, \"docker.io\": {\"auth\": \"" +
             auth("plain:p") + "\"}}}");
  CHECK(user_for({both}, "library/ubuntu:24.04") == "plain");
  // Hub namespaces: docker.io/library/... for the official images.
  const AuthFile ns =
      parsed("{\"auths\": {\"docker.io/library\": {\"auth\": \"" +
             auth("lib:p") + "\"}}}");
  CHECK(user_for({ns}, "ubuntu:24.04") == "lib");
  CHECK(user_for({ns}, "nvidia/cuda:1").empty());
}

TEST_CASE("files are searched in order until one has an entry",
          "[unit][registry-auth]") {
  const AuthFile first =
      parsed("{\"auths\": {\"a.example.com\": {\"auth\": \"" + auth("first:p") +
             "\"}}}");
  const AuthFile second = parsed(
      "{\"auths\": {\"a.example.com\": {\"auth\": \"" + auth("second:p") +
      "\"}, \"b.example.com\": {\"auth\": \"" + auth("second-b:p") + "\"}}}");
  CHECK(user_for({first, second}, "a.example.com/x:1") == "first");
  CHECK(user_for({first, second}, "b.example.com/x:1") == "second-b");
  // An empty entry without a helper is no entry: the search goes on.
  const AuthFile empty = parsed("{\"auths\": {\"b.example.com\": {}}}");
  CHECK(user_for({empty, second}, "b.example.com/x:1") == "second-b");
}

TEST_CASE("credentials in a helper program are refused, naming the helper",
          "[unit][registry-auth]") {
  const AuthFile helpers =
      parsed("{\"auths\": {\"nvcr.io\": {\"auth\": \"" + auth("u:p") +
             "\"}}, \"credHelpers\": {\"123.dkr.ecr.us-east-1.amazonaws.com\": "
             "\"ecr-login\"}}");
  auto ecr = credentials_for({helpers},
                             "123.dkr.ecr.us-east-1.amazonaws.com/nvidia/x:1");
  REQUIRE_FALSE(ecr);
  CHECK(ecr.error().exit == ExitCode::kUsage);
  CHECK_THAT(ecr.error().message,
             Catch::Contains("docker-credential-ecr-login") &&
                 Catch::Contains("credHelpers") &&
                 Catch::Contains("does not run helper programs"));
  CHECK(user_for({helpers}, "nvcr.io/nvidia/x:1") == "u");  // others work

  // docker login with a credsStore leaves an empty entry behind.
  const AuthFile store = parsed(
      "{\"auths\": {\"https://index.docker.io/v1/\": {}}, \"credsStore\": "
      "\"desktop\"}");
  auto hub = credentials_for({store}, "nvidia/cuda:1");
  REQUIRE_FALSE(hub);
  CHECK(hub.error().exit == ExitCode::kUsage);
  CHECK_THAT(hub.error().message,
             Catch::Contains("docker-credential-desktop") &&
                 Catch::Contains("credsStore"));
  // A host it has no entry for is pulled anonymously.
  CHECK(user_for({store}, "nvcr.io/nvidia/x:1").empty());
}

TEST_CASE("an identitytoken entry is refused clearly",
          "[unit][registry-auth]") {
  const AuthFile f = parsed(
      "{\"auths\": {\"r.example.com\": {\"identitytoken\": \"s3cr3t\"}}}");
  auto c = credentials_for({f}, "r.example.com/x/y:1");
  REQUIRE_FALSE(c);
  CHECK(c.error().exit == ExitCode::kUsage);
  CHECK_THAT(c.error().message,
             Catch::Contains("identitytoken") && !Catch::Contains("s3cr3t"));
  // With the placeholder user docker login writes beside it (ACR), too.
  const AuthFile acr = parsed("{\"auths\": {\"r.azurecr.io\": {\"auth\": \"" +
                              auth("00000000-0000-0000-0000-000000000000:") +
                              "\", \"identitytoken\": \"s3cr3t\"}}}");
  auto a = credentials_for({acr}, "r.azurecr.io/x/y:1");
  REQUIRE_FALSE(a);
  CHECK(a.error().exit == ExitCode::kUsage);
  CHECK_THAT(a.error().message, Catch::Contains("identitytoken"));
}

TEST_CASE(
    "each malformed auth file is a usage error naming it, not its "
    "secrets",
    "[unit][registry-auth]") {
  const std::string secret = "hunter2-s3cr3t";
  const std::pair<std::string, std::string> cases[] = {
      {"not json " + secret, "not JSON"},
      {"[\"" + secret + "\"]", "not a JSON object"},
      {"{\"auths\": [\"" + secret + "\"]}", "\"auths\" is not an object"},
      {"{\"auths\": {\"r.io\": \"" + secret + "\"}}", "is not an object"},
      {"{\"auths\": {\"r.io\": {\"auth\": 7}}}", "\"auth\" is not a string"},
      {"{\"auths\": {\"r.io\": {\"auth\": \"" + secret + "!\"}}}",
       "not base64"},
      // base64 of "nocolon-hunter2": no user:password split.
      {"{\"auths\": {\"r.io\": {\"auth\": \"" + auth("nocolon" + secret) +
           "\"}}}",
       "not base64 of \"user:password\""},
      {"{\"auths\": {\"r.io\": {\"auth\": \"" + auth(":" + secret) + "\"}}}",
       "not base64 of \"user:password\""},
      {"{\"auths\": {\"r.io\": {\"password\": [\"" + secret + "\"]}}}",
       "\"password\" is not a string"},
      {"{\"credHelpers\": [\"x\"]}", "\"credHelpers\" is not an object"},
      {"{\"credHelpers\": {\"r.io\": 1}}", "is not a string"},
      {"{\"credsStore\": {}}", "\"credsStore\" is not a string"},
  };
  for (const auto& [text, why] : cases) {
    auto f = parse_auth_file("/x/auth.json", text);
    INFO(text);
    REQUIRE_FALSE(f);
    CHECK(f.error().exit == ExitCode::kUsage);
    CHECK_THAT(f.error().message, Catch::Contains("/x/auth.json") &&
                                      Catch::Contains(why) &&
                                      !Catch::Contains(secret));
    CHECK_THAT(f.error().fix, !Catch::Contains(secret));
  }
}

TEST_CASE("the default auth files are containers-auth.json(5)'s, in order",
          "[unit][registry-auth]") {
  using V = std::vector<std::string>;
  CHECK(bundle::default_auth_files(env_of({{"REGISTRY_AUTH_FILE", "/r.json"},
                                           {"XDG_RUNTIME_DIR", "/run/u"},
                                           {"XDG_CONFIG_HOME", "/cfg"},
                                           {"HOME", "/home/u"}})) ==
        V{"/r.json", "/run/u/containers/auth.json", "/cfg/containers/auth.json",
          "/home/u/.docker/config.json"});
  // Without XDG_CONFIG_HOME: ~/.config; unset or empty variables skipped.
  CHECK(
      bundle::default_auth_files(
          env_of({{"REGISTRY_AUTH_FILE", ""}, {"HOME", "/home/u"}})) ==
      V{"/home/u/.config/containers/auth.json", "/home/u/.docker/config.json"});
  CHECK(bundle::default_auth_files(env_of({})).empty());
}

TEST_CASE("load_auth_files reads the defaults that exist and the named file",
          "[unit][registry-auth]") {
  TempDir t;
  const std::string home = t.path() + "/home";
  const std::string run = t.path() + "/run";
  ::mkdir(home.c_str(), 0700);
  ::mkdir((home + "/.docker").c_str(), 0700);
  write_text(
      home + "/.docker/config.json",
      "{\"auths\": {\"r.io\": {\"auth\": \"" + auth("docker:p") + "\"}}}",
      0600);
  const auto env = env_of({{"HOME", home}, {"XDG_RUNTIME_DIR", run}});

  // Only ~/.docker/config.json exists: it alone is read.
  auto files = bundle::load_auth_files("", env);
  REQUIRE(files);
  REQUIRE(files->size() == 1);
  CHECK(user_for(*files, "r.io/a/b:1") == "docker");
  CHECK_FALSE(files->front().readable_by_others);

  // $XDG_RUNTIME_DIR/containers/auth.json comes first.
  ::mkdir(run.c_str(), 0700);
  ::mkdir((run + "/containers").c_str(), 0700);
  write_text(
      run + "/containers/auth.json",
      "{\"auths\": {\"r.io\": {\"auth\": \"" + auth("podman:p") + "\"}}}",
      0644);
  files = bundle::load_auth_files("", env);
  REQUIRE(files);
  REQUIRE(files->size() == 2);
  CHECK(user_for(*files, "r.io/a/b:1") == "podman");
  CHECK(files->front().readable_by_others);

  // A named file replaces the defaults.
  const std::string named = t.path() + "/named.json";
  write_text(named,
             "{\"auths\": {\"r.io\": {\"auth\": \"" + auth("named:p") + "\"}}}",
             0600);
  files = bundle::load_auth_files(named, env);
  REQUIRE(files);
  REQUIRE(files->size() == 1);
  CHECK(user_for(*files, "r.io/a/b:1") == "named");

  // No default exists: anonymous.
  files = bundle::load_auth_files("", env_of({{"HOME", t.path() + "/none"}}));
  REQUIRE(files);
  CHECK(files->empty());
}

TEST_CASE(
    "a Docker config.json of many logins (over a key's 64 KiB) is read, "
    "and one over 1 MiB is refused by name, as an auth file",
    "[unit][registry-auth]") {
  TempDir t;
  const auto env = env_of({{"HOME", t.path()}});
  auto config = [](std::size_t registries) {
    std::string text = "{\"auths\": {";
    for (std::size_t i = 0; i < registries; ++i)
      text += "\"r" + std::to_string(i) + ".example.com\": {\"auth\": \"" +
              auth("user" + std::to_string(i) + ":p") + "\"}, ";
    return text + "\"r.io\": {\"auth\": \"" + auth("last:p") + "\"}}}";
  };
  const std::string many = t.path() + "/many.json";
  write_text(many, config(2000), 0600);
  REQUIRE(std::filesystem::file_size(many) > 64 * 1024);
  auto files = bundle::load_auth_files(many, env);
  REQUIRE(files);
  CHECK(user_for(*files, "r.io/a/b:1") == "last");

  const std::string huge = t.path() + "/huge.json";
  write_text(huge, config(30000), 0600);
  REQUIRE(std::filesystem::file_size(huge) > 1024 * 1024);
  auto refused = bundle::load_auth_files(huge, env);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().exit == gpunode::ExitCode::kUsage);
  CHECK_THAT(refused.error().message,
             Catch::Contains("--registry-auth: '" + huge +
                             "' is too large for a registry auth file"));
  CHECK(refused.error().message.find("user1") == std::string::npos);
}

TEST_CASE(
    "a named auth file missing, unreadable or malformed is a usage "
    "error",
    "[unit][registry-auth]") {
  TempDir t;
  const auto env = env_of({{"HOME", t.path()}});
  auto missing = bundle::load_auth_files(t.path() + "/nope.json", env);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().exit == ExitCode::kUsage);
  CHECK_THAT(missing.error().message,
             Catch::Contains("--registry-auth") &&
                 Catch::Contains(t.path() + "/nope.json"));

  auto dir = bundle::load_auth_files(t.path(), env);
  REQUIRE_FALSE(dir);
  CHECK(dir.error().exit == ExitCode::kUsage);

  const std::string bad = t.path() + "/bad.json";
  write_text(bad, "{\"auths\": {\"r.io\": {\"auth\": \"hunter2-s3cr3t\"}}}");
  auto malformed = bundle::load_auth_files(bad, env);
  REQUIRE_FALSE(malformed);
  CHECK(malformed.error().exit == ExitCode::kUsage);
  CHECK_THAT(malformed.error().message,
             Catch::Contains(bad) && !Catch::Contains("hunter2"));

  // A malformed default file is refused too, not skipped.
  ::mkdir((t.path() + "/.docker").c_str(), 0700);
  write_text(t.path() + "/.docker/config.json", "{");
  auto def = bundle::load_auth_files("", env);
  REQUIRE_FALSE(def);
  CHECK(def.error().exit == ExitCode::kUsage);
  CHECK_THAT(def.error().message, Catch::Contains(".docker/config.json"));
}

}  // namespace gpunode::test
