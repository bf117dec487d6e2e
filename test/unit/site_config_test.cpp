// Site defaults: precedence (flag > environment > file > built-in) and one
// test per kind of bad input, each checking the exact message and that
// nothing under the root changed.
#include "cli/site_config.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli.hpp"
#include "gpunode/bundle.hpp"
#include "gpunode/bundle_create.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

using namespace gpunode;
using gpunode::test::TempDir;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

void write_config(const TempDir& root, const std::string& text) {
  test::write_text(root.path() + "/etc/gpunode/config.toml", text);
}

const Setting& find(const std::vector<Setting>& all, const std::string& key) {
  for (const auto& s : all)
    if (s.key == key) return s;
  FAIL("no setting " << key);
  return all.front();
}

Error expect_error(const TempDir& root, const EnvLookup& env) {
  FlagValues v;
  v.root = root.path();
  auto r = resolve_site_settings(v, {}, env);
  REQUIRE_FALSE(r);
  CHECK(r.error().exit == ExitCode::kUsage);
  return r.error();
}

// A bundle at WORK/stick signed by a key installed in ROOT as
// /etc/gpunode/keys/site.pub; returns the bundle's path.
std::string make_site_signed_stick(const TempDir& root, const TempDir& work) {
  auto keys = bundle::generate_keypair();
  REQUIRE(keys);
  test::write_text(root.path() + "/etc/gpunode/keys/site.pub",
                   keys->public_pem);
  const auto plugin =
      test::build_image(work.path() + "/plugin.tar", test::ImageSpec{});
  bundle::CreateOptions o;
  o.out = work.path() + "/stick";
  o.image_archives = {plugin.path};
  o.self_binary = work.path() + "/plugin.tar";  // any file stands in
  o.created = "2026-01-31T12:00:00Z";
  o.sign_key_pem = keys->private_pem;
  REQUIRE(bundle::create_bundle(o));
  return o.out;
}

}  // namespace

TEST_CASE("no file and no environment: built-in defaults", "[config]") {
  TempDir root;
  FlagValues v;
  v.root = root.path();
  auto r = resolve_site_settings(v, {}, env_of({}));
  REQUIRE(r);
  CHECK(find(*r, "variant").value == "default");
  CHECK(find(*r, "variant").source == SettingSource::kBuiltIn);
  CHECK(find(*r, "timeout").value == "10m");
  CHECK(v.variant == "default");
  CHECK_FALSE(v.replicas);
}

TEST_CASE("flag beats environment beats file beats built-in", "[config]") {
  TempDir root;
  write_config(root,
               "# site defaults\n"
               "variant = \"time-slicing\"\n"
               "replicas = 4\n"
               "timeout = \"20m\"\n"
               "min-driver = \"550.54.15\"\n"
               "trust-keys = [\"/etc/gpunode/keys/site.pub\"]\n");
  FlagValues v;
  v.root = root.path();
  v.timeout = "30s";  // as CLI11 stores --timeout 30s
  auto r = resolve_site_settings(
      v, {"--timeout"},
      env_of({{"GPUNODE_REPLICAS", "6"}, {"GPUNODE_MIN_DRIVER", ""}}));
  REQUIRE(r);
  CHECK(v.timeout == "30s");
  CHECK(find(*r, "timeout").source == SettingSource::kFlag);
  CHECK(find(*r, "timeout").origin == "--timeout");
  CHECK(v.replicas == 6);
  CHECK(find(*r, "replicas").source == SettingSource::kEnv);
  CHECK(find(*r, "replicas").origin == "GPUNODE_REPLICAS");
  CHECK(v.variant == "time-slicing");
  CHECK(find(*r, "variant").source == SettingSource::kFile);
  CHECK(find(*r, "variant").origin ==
        root.path() + "/etc/gpunode/config.toml:2");
  // An empty variable is unset: the file's value stands.
  CHECK(v.min_driver == "550.54.15");
  CHECK(find(*r, "min-driver").source == SettingSource::kFile);
  // Key paths in the file are host paths, read under --root.
  REQUIRE(v.trust_keys.size() == 1);
  CHECK(v.trust_keys[0] == root.path() + "/etc/gpunode/keys/site.pub");
  auto options = validate_flags(v);
  REQUIRE(options);
  CHECK(options->sharing.replicas == 6);
}

TEST_CASE("a site replicas default is unused with the default variant",
          "[config]") {
  TempDir root;
  write_config(root, "replicas = 4\n");
  FlagValues v;
  v.root = root.path();
  auto r = resolve_site_settings(v, {}, env_of({}));
  REQUIRE(r);
  CHECK_FALSE(v.replicas);
  CHECK(find(*r, "replicas").value == "(unused: variant default)");
  CHECK(validate_flags(v));
}

TEST_CASE("bad config files name the file, line and key", "[config]") {
  struct Case {
    const char* text;
    const char* message;  // after "<file>:"
  };
  const Case cases[] = {
      {"variant = \"default\"\nreplicas = [\n",
       "2: Error while parsing array: encountered end-of-file"},  // syntax
      {"variant = \"default\"\ncolour = \"red\"\n",
       "2: key 'colour': unknown key (known: variant, replicas, timeout, "
       "min-driver, trust-keys)"},
      {"replicas = \"8\"\n", "1: key 'replicas': expected an integer"},
      {"variant = 1\n", "1: key 'variant': expected a string"},
      {"trust-keys = \"/a.pub\"\n",
       "1: key 'trust-keys': expected an array of paths"},
      {"\nvariant = \"mig\"\n",
       "2: key 'variant': unknown variant 'mig' (choose 'default' or "
       "'time-slicing')"},
      {"replicas = 1\n",
       "1: key 'replicas': expected 2 to 1024 slots per GPU, got 1"},
      {"timeout = \"soon\"\n",
       "1: key 'timeout': expected a positive duration of at most 168h such "
       "as 10m, 90s or 1h30m, got 'soon'"},
      {"min-driver = \"550.x\"\n",
       "1: key 'min-driver': expected a dotted version such as 550.54.15, got "
       "'550.x'"},
      {"trust-keys = [\"keys/a.pub\"]\n",
       "1: key 'trust-keys': expected an absolute path, got 'keys/a.pub'"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    TempDir root;
    write_config(root, c.text);
    const Error e = expect_error(root, env_of({}));
    CHECK_THAT(e.message,
               Catch::StartsWith(root.path() +
                                 "/etc/gpunode/config.toml:" + c.message));
    // A fix that names the file (a syntax error names no key).
    if (std::string(c.message).find("key '") != std::string::npos) {
      CHECK_THAT(e.fix, Catch::StartsWith("correct or remove key '") &&
                            Catch::EndsWith("' in " + root.path() +
                                            "/etc/gpunode/config.toml"));
    }
  }
}

// Regression (independent try of issue 26): a syntax error had no fix.
TEST_CASE("a config.toml that does not parse says which line to correct",
          "[config][regression]") {
  TempDir root;
  write_config(root, "variant = \"default\"\nreplicas = [\n");
  const Error e = expect_error(root, env_of({}));
  CHECK(e.fix == "correct line 2 of " + root.path() +
                     "/etc/gpunode/config.toml (TOML: key = \"text\" or "
                     "key = number, one a line)");
}

TEST_CASE("bad environment values name the variable", "[config]") {
  TempDir root;
  CHECK(expect_error(root, env_of({{"GPUNODE_REPLICAS", "lots"}})).message ==
        "GPUNODE_REPLICAS: expected a whole number, got 'lots'");
  CHECK(expect_error(root, env_of({{"GPUNODE_VARIANT", "mig"}})).message ==
        "GPUNODE_VARIANT: unknown variant 'mig' (choose 'default' or "
        "'time-slicing')");
  CHECK(expect_error(root, env_of({{"GPUNODE_TIMEOUT", "0s"}})).message ==
        "GPUNODE_TIMEOUT: expected a positive duration of at most 168h such "
        "as 10m, 90s or 1h30m, got '0s'");
  CHECK(expect_error(root, env_of({{"GPUNODE_TRUST_KEYS", "/a.pub,b.pub"}}))
            .message ==
        "GPUNODE_TRUST_KEYS: expected an absolute path, got 'b.pub'");
  // The fix names the variable and the flag that overrides it.
  CHECK(expect_error(root, env_of({{"GPUNODE_TIMEOUT", "bogus"}})).fix ==
        "set GPUNODE_TIMEOUT in gpunode's environment to a valid value, or "
        "unset it (--timeout, when given, overrides it)");
}

namespace {
test::Run cli(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"gpunode"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  std::ostringstream out, err;
  const int code =
      run_cli(static_cast<int>(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}
}  // namespace

TEST_CASE("config show prints each value and its source", "[config]") {
  TempDir root;
  write_config(root, "variant = \"time-slicing\"\n");
  test::ScopedEnv env;
  for (const auto& spec : setting_specs()) env.unset(spec.env);
  env.set("GPUNODE_TIMEOUT", "5m");
  auto r = cli({"config", "show", "--root", root.path(), "--replicas", "3"});
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "variant:    time-slicing  (file " + root.path() +
            "/etc/gpunode/config.toml:1)\n"
            "replicas:   3  (flag --replicas)\n"
            "timeout:    5m  (env GPUNODE_TIMEOUT)\n"
            "min-driver: (none)  (built-in)\n"
            "trust-keys: (none; also /etc/gpunode/trusted-keys/*.pub)  "
            "(built-in)\n");
  auto j = cli({"config", "show", "--root", root.path(), "--json"});
  CHECK(j.exit_code == 0);
  CHECK(j.out.find("{\"key\":\"variant\",\"origin\":\"" + root.path() +
                   "/etc/gpunode/config.toml:1\",\"source\":\"file\","
                   "\"value\":\"time-slicing\"}") != std::string::npos);
}

TEST_CASE("a bad config file stops every command before it changes anything",
          "[config]") {
  TempDir root;
  write_config(root, "variant = \"mig\"\n");
  const auto before = test::snapshot_tree(root.path());
  for (const char* command :
       {"config", "plan", "status", "install", "uninstall"}) {
    INFO(command);
    std::vector<std::string> args = {command};
    if (std::string(command) == "config") args.push_back("show");
    args.insert(args.end(), {"--root", root.path()});
    if (std::string(command) == "install") args.push_back("--dry-run");
    auto r = cli(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(root.path() +
                     "/etc/gpunode/config.toml:1: key 'variant': unknown "
                     "variant 'mig'") != std::string::npos);
  }
  CHECK(test::snapshot_tree(root.path()) == before);
}

TEST_CASE("bundle verify trusts the keys config.toml names", "[config]") {
  TempDir root;
  TempDir work;
  const std::string stick = make_site_signed_stick(root, work);
  test::ScopedEnv env;
  env.unset("GPUNODE_TRUST_KEYS");

  // No key anywhere: refused, exit 4.
  auto none = cli({"bundle", "verify", stick, "--root", root.path()});
  CHECK(none.exit_code == 4);
  write_config(root, "trust-keys = [\"/etc/gpunode/keys/site.pub\"]\n");
  auto ok = cli({"bundle", "verify", stick, "--root", root.path()});
  CHECK(ok.exit_code == 0);
  CHECK(ok.err.find("bundle verify: ok") != std::string::npos);
  CHECK(ok.err.find("signed by") != std::string::npos);
  // A broken config stops verify too (exit 2), naming the line.
  write_config(root, "trust-keys = [\"keys/site.pub\"]\n");
  auto bad = cli({"bundle", "verify", stick, "--root", root.path()});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("config.toml:1: key 'trust-keys': expected an absolute "
                     "path, got 'keys/site.pub'") != std::string::npos);
}

TEST_CASE(
    "bundle verify prints several problems one per line, each escaped, and "
    "lists them in --json",
    "[config][bundle]") {
  TempDir root;
  TempDir work;
  const std::string stick = make_site_signed_stick(root, work);
  test::ScopedEnv env;
  env.unset("GPUNODE_TRUST_KEYS");
  const std::string key = root.path() + "/etc/gpunode/keys/site.pub";
  // manifests/ moved aside and a link left in its place.
  std::filesystem::rename(stick + "/manifests", work.path() + "/manifests");
  std::filesystem::create_symlink(work.path() + "/manifests",
                                  stick + "/manifests");
  const auto on_stick = test::snapshot_tree(stick);
  auto r = cli({"bundle", "verify", stick, "--trust-key", key});
  CHECK(r.exit_code == 4);
  CHECK_THAT(r.err, Catch::Contains("[ERROR bundle] manifests: is a symbolic "
                                    "link (to " +
                                    work.path() + "/manifests)"));
  CHECK_THAT(r.err, Catch::Contains("\n  manifests/"));
  CHECK_THAT(r.err, Catch::Contains(": is missing\n"));
  CHECK_THAT(r.err, !Catch::Contains("\\n"));
  auto j = cli({"bundle", "verify", stick, "--trust-key", key, "--json"});
  CHECK(j.exit_code == 4);
  nlohmann::json error;
  std::istringstream lines(j.out);
  for (std::string line; std::getline(lines, line);) {
    auto event = nlohmann::json::parse(line);
    if (event["event"] == "error") error = event;
  }
  REQUIRE(error.is_object());
  REQUIRE(error["problems"].is_array());
  CHECK(error["problems"].size() >= 2);
  CHECK(error["problems"][0] ==
        "manifests: is a symbolic link (to " + work.path() +
            "/manifests); bundles may not contain links");
  // The message is as it was: the problems joined by newlines.
  std::string joined;
  for (const auto& p : error["problems"])
    joined += (joined.empty() ? "" : "\n") + p.get<std::string>();
  CHECK(error["message"] == joined);
  CHECK(test::snapshot_tree(stick) == on_stick);
}

TEST_CASE(
    "a trust-keys path from config.toml that cannot be read names "
    "config.toml and its line, not --trust-key",
    "[config]") {
  TempDir root;
  TempDir work;
  const std::string stick = make_site_signed_stick(root, work);
  test::ScopedEnv env;
  env.unset("GPUNODE_TRUST_KEYS");
  const std::string config = root.path() + "/etc/gpunode/config.toml";
  write_config(root,
               "# site keys\ntrust-keys = [\"/etc/gpunode/keys/gone.pub\"]\n");
  const auto before = test::snapshot_tree(root.path());
  auto r = cli({"bundle", "verify", stick, "--root", root.path()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains(config + ":2: cannot read '" + root.path() +
                                    "/etc/gpunode/keys/gone.pub'"));
  CHECK_THAT(r.err, !Catch::Contains("--trust-key"));
  CHECK(test::snapshot_tree(root.path()) == before);
}

TEST_CASE(
    "a config.toml that sets trust-keys and that others may write is no "
    "anchor: exit 5, like a key file with that mode",
    "[config]") {
  TempDir root;
  TempDir work;
  const std::string stick = make_site_signed_stick(root, work);
  test::ScopedEnv env;
  env.unset("GPUNODE_TRUST_KEYS");
  const std::string config = root.path() + "/etc/gpunode/config.toml";
  write_config(root, "trust-keys = [\"/etc/gpunode/keys/site.pub\"]\n");
  for (const auto& [mode, who] : std::vector<std::pair<mode_t, std::string>>{
           {0666, "everyone"}, {0664, "its group"}}) {
    INFO(who);
    REQUIRE(::chmod(config.c_str(), mode) == 0);
    const auto before = test::snapshot_tree(root.path());
    const auto on_stick = test::snapshot_tree(stick);
    auto r = cli({"bundle", "verify", stick, "--root", root.path()});
    CHECK(r.exit_code == 5);
    CHECK_THAT(r.err, Catch::Contains("[ERROR trust] site config (it sets "
                                      "trust-keys) " +
                                      config + " is not a trust anchor: " +
                                      config + " is writable by " + who));
    CHECK_THAT(r.err, Catch::Contains("fix: sudo chmod go-w " + config));
    // config.toml has its fixed place: moving it is no fix.
    CHECK_THAT(r.err, !Catch::Contains("move the key"));
    CHECK(test::snapshot_tree(root.path()) == before);
    CHECK(test::snapshot_tree(stick) == on_stick);
    // Every command that reads the file: the same exit and check code.
    for (const char* command :
         {"config", "plan", "status", "install", "uninstall"}) {
      INFO(command);
      std::vector<std::string> args = {command};
      if (std::string(command) == "config") args.push_back("show");
      args.insert(args.end(), {"--root", root.path()});
      auto c = cli(args);
      CHECK(c.exit_code == 5);
      CHECK_THAT(c.err, Catch::Contains("[ERROR trust] site config (it sets "
                                        "trust-keys) " +
                                        config + " is not a trust anchor"));
      CHECK_THAT(c.err, Catch::Contains("fix: sudo chmod go-w " + config));
      CHECK_THAT(c.err, !Catch::Contains("move the key"));
      CHECK(test::snapshot_tree(root.path()) == before);
    }
  }
  // Root's own mode: trusted as before.
  REQUIRE(::chmod(config.c_str(), 0644) == 0);
  CHECK(cli({"bundle", "verify", stick, "--root", root.path()}).exit_code == 0);
  // A loose file that does not decide trust (a flag does) is not refused.
  REQUIRE(::chmod(config.c_str(), 0666) == 0);
  CHECK(cli({"bundle", "verify", stick, "--root", root.path(), "--trust-key",
             root.path() + "/etc/gpunode/keys/site.pub"})
            .exit_code == 0);
}

// Regression (independent try of issue 26): a config.toml everyone may
// write was taken without a word when it set no trust-keys, and so chose
// the cluster's device plugin for whoever wrote it.
TEST_CASE(
    "a config.toml others may write: a run that takes a setting from it is "
    "exit 5, one that takes none is warned",
    "[config][regression]") {
  TempDir root;
  test::ScopedEnv env;
  for (const auto& spec : setting_specs()) env.unset(spec.env);
  const std::string config = root.path() + "/etc/gpunode/config.toml";
  write_config(root, "timeout = \"20m\"\n");
  REQUIRE(::chmod(config.c_str(), 0666) == 0);
  const auto before = test::snapshot_tree(root.path());
  for (const char* command : {"status", "plan", "install"}) {
    INFO(command);
    auto r = cli({command, "--json", "--root", root.path()});
    CHECK(r.exit_code == 5);
    const auto last = nlohmann::json::parse(
        r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1));
    CHECK(last["exit_code"] == 5);
    CHECK(last["summary"] ==
          config + " sets timeout for this run, and " + config +
              " is writable by everyone (mode 0666): someone other than "
              "root could choose what gpunode does here");
    CHECK(test::snapshot_tree(root.path()) == before);
  }
  // Every setting it has given by a flag: warned of, and the run goes on.
  auto flagged = cli({"status", "--json", "--root", root.path(), "--timeout",
                      "5m", "--only", "preflight"});
  CHECK(flagged.exit_code != 5);
  CHECK_THAT(flagged.out,
             Catch::Contains(R"("event":"warning","layer":"config")") &&
                 Catch::Contains("fix: sudo chmod go-w " + config));
  CHECK(test::snapshot_tree(root.path()) == before);
  // Root's own mode: no refusal, no warning.
  REQUIRE(::chmod(config.c_str(), 0644) == 0);
  auto quiet = cli({"status", "--root", root.path(), "--only", "preflight"});
  CHECK(quiet.exit_code != 5);
  CHECK_THAT(quiet.err, !Catch::Contains("sets this node's defaults"));
}

// Regression (independent try of issue 26): the findings about config show,
// the environment and echoed values, each pinned to its exact text.
namespace {
test::ScopedEnv& clean_env(test::ScopedEnv& env) {
  for (const auto& spec : setting_specs()) env.unset(spec.env);
  return env;
}
// CLI11 wraps help lines: each run of spaces and newlines as one space.
std::string folded_space(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n';
    if (!space)
      out += c;
    else if (!out.empty() && out.back() != ' ')
      out += ' ';
  }
  return out;
}
std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    lines.push_back(nlohmann::json::parse(line));
  return lines;
}
}  // namespace

TEST_CASE("config show refuses bad flag values as install does",
          "[config][regression]") {
  TempDir root;
  test::ScopedEnv env;
  clean_env(env);
  const auto before = test::snapshot_tree(root.path());
  auto r = cli({"config", "show", "--root", root.path(), "--variant", "bogus"});
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("--variant: unknown variant 'bogus' (choose 'default' or "
                   "'time-slicing')") != std::string::npos);
  auto t = cli({"config", "show", "--root", root.path(), "--timeout", "0s"});
  CHECK(t.exit_code == 2);
  CHECK(t.err.find("--timeout: expected a positive duration") !=
        std::string::npos);
  CHECK(test::snapshot_tree(root.path()) == before);
}

TEST_CASE("config show --json ends with a result event, also when refused",
          "[config][regression]") {
  TempDir root;
  test::ScopedEnv env;
  clean_env(env);
  // Not UTF-8: once an internal json error (exit 5), now a usage error.
  auto bad = cli({"config", "show", "--root", root.path(), "--json",
                  "--variant", "a\xff"});
  CHECK(bad.exit_code == 2);
  auto lines = json_lines(bad.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["event"] == "error");
  CHECK(lines[0]["exit_code"] == 2);
  CHECK(lines[1]["event"] == "result");
  CHECK(lines[1]["command"] == "config show");
  CHECK(lines[1]["status"] == "invalid-input");

  write_config(root, "variant = \"time-slicing\"\nreplicas = 4\n");
  auto ok = cli({"config", "show", "--root", root.path(), "--json"});
  CHECK(ok.exit_code == 0);
  lines = json_lines(ok.out);
  REQUIRE(lines.size() == 1);
  const nlohmann::json& result = lines[0];
  CHECK(result["event"] == "result");
  CHECK(result["schema"] == 1);
  CHECK(result["command"] == "config show");
  CHECK(result["exit_code"] == 0);
  const nlohmann::json& effective = result["effective"];
  CHECK(effective["variant"] == "time-slicing");
  CHECK(effective["replicas"] == 4);  // a number, not a display string
  CHECK(effective["timeout"] == 600.0);
  CHECK(effective["min-driver"].is_null());
  CHECK(effective["trust-keys"] == nlohmann::json::array());

  // A site replicas default unused by the default variant: 1 slot per GPU.
  auto unused = cli({"config", "show", "--root", root.path(), "--json",
                     "--variant", "default"});
  CHECK(unused.exit_code == 0);
  CHECK(json_lines(unused.out).at(0)["effective"]["replicas"] == 1);
}

TEST_CASE("a given flag overrides its variable: a bad variable is not read",
          "[config][regression]") {
  TempDir root;
  FlagValues v;
  v.root = root.path();
  v.replicas = 4;
  auto r = resolve_site_settings(v, {"--replicas"},
                                 env_of({{"GPUNODE_REPLICAS", "lots"},
                                         {"GPUNODE_VARIANT", "time-slicing"}}));
  REQUIRE(r);
  CHECK(find(*r, "replicas").source == SettingSource::kFlag);
  CHECK(v.replicas == 4);
  // Without the flag the same variable is refused, as before.
  FlagValues w;
  w.root = root.path();
  CHECK_FALSE(
      resolve_site_settings(w, {}, env_of({{"GPUNODE_REPLICAS", "lots"}})));
}

TEST_CASE("a time-slicing flag refused names where the variant came from",
          "[config][regression]") {
  TempDir root;
  test::ScopedEnv env;
  clean_env(env);
  env.set("GPUNODE_VARIANT", "default");
  const auto before = test::snapshot_tree(root.path());
  auto r = cli({"plan", "--root", root.path(), "--rename-shared"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--rename-shared: applies only to --variant time-slicing; "
                   "the variant 'default' comes from GPUNODE_VARIANT") !=
        std::string::npos);
  CHECK(test::snapshot_tree(root.path()) == before);
  env.unset("GPUNODE_VARIANT");
  TempDir with_file;
  write_config(with_file, "variant = \"default\"\n");
  const auto before_file = test::snapshot_tree(with_file.path());
  auto f = cli({"plan", "--root", with_file.path(), "--replicas", "4"});
  CHECK(f.exit_code == 2);
  CHECK(f.err.find("; the variant 'default' comes from " + with_file.path() +
                   "/etc/gpunode/config.toml:1") != std::string::npos);
  CHECK(test::snapshot_tree(with_file.path()) == before_file);
  // Given by flag, the variant needs no origin.
  auto g = cli({"plan", "--root", with_file.path(), "--variant", "default",
                "--replicas", "4"});
  CHECK(g.exit_code == 2);
  CHECK(g.err.find("comes from") == std::string::npos);
}

TEST_CASE("help: the setting flags name their variables and config keys",
          "[config][regression]") {
  for (const char* command : {"install", "plan", "status"}) {
    INFO(command);
    auto r = cli({command, "--help"});
    CHECK(r.exit_code == 0);
    for (const char* text :
         {"Unset: GPUNODE_VARIANT, else config.toml's variant",
          "Unset: GPUNODE_REPLICAS, else config.toml's replicas",
          "Unset: GPUNODE_TIMEOUT, else config.toml's timeout",
          "Unset: GPUNODE_MIN_DRIVER, else config.toml's min-driver",
          "GPUNODE_TRUST_KEYS, else config.toml's trust-keys"}) {
      INFO(text);
      CHECK(folded_space(r.out).find(text) != std::string::npos);
    }
  }
}

TEST_CASE("a huge value is echoed cut, with its size", "[config][regression]") {
  TempDir root;
  test::ScopedEnv env;
  clean_env(env);
  const std::string huge(20000, 'v');
  auto r = cli({"plan", "--root", root.path(), "--variant", huge});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--variant: unknown variant '" + std::string(64, 'v') +
                   "...' (20000 bytes)") != std::string::npos);
  CHECK(r.err.size() < 1000);
  env.set("GPUNODE_TIMEOUT", huge);
  auto e = cli({"config", "show", "--root", root.path()});
  CHECK(e.exit_code == 2);
  CHECK(e.err.find("(20000 bytes)") != std::string::npos);
  CHECK(e.err.size() < 1000);
}

// Regression (independent try of issue 26, second round).
TEST_CASE("config show reads --replicas as install does: decimal only",
          "[config][regression]") {
  TempDir root;
  test::ScopedEnv env;
  clean_env(env);
  auto r = cli({"config", "show", "--root", root.path(), "--variant",
                "time-slicing", "--replicas", "010"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("replicas:   10  (flag --replicas)") != std::string::npos);
  auto hex = cli({"config", "show", "--root", root.path(), "--variant",
                  "time-slicing", "--replicas", "0x10"});
  CHECK(hex.exit_code == 2);
  CHECK(hex.err.find("expected a whole number in decimal, got '0x10'") !=
        std::string::npos);
  auto help = cli({"config", "show", "--help"});
  CHECK(folded_space(help.out).find(
            "Unset: GPUNODE_VARIANT, else config.toml's variant, else "
            "default") != std::string::npos);
}

TEST_CASE("a config.toml link that leads nowhere in the root is refused",
          "[config][regression]") {
  for (const std::string target :
       {"config.toml", "/nope.toml", "../../../../../../outside.toml"}) {
    INFO(target);
    TempDir root;
    test::ScopedEnv env;
    clean_env(env);
    std::filesystem::create_directories(root.path() + "/etc/gpunode");
    const std::string link = root.path() + "/etc/gpunode/config.toml";
    REQUIRE(::symlink(target.c_str(), link.c_str()) == 0);
    const auto before = test::snapshot_tree(root.path());
    for (const auto& args :
         {std::vector<std::string>{"config", "show", "--root", root.path()},
          std::vector<std::string>{"plan", "--root", root.path()}}) {
      INFO(args.front());
      auto r = cli(args);
      CHECK(r.exit_code == 2);
      CHECK(r.err.find(link +
                       ": a symbolic link that leads to no file inside the "
                       "root (dangling, a loop, or out of it)") !=
            std::string::npos);
      CHECK(r.err.find("fix: point it at a file under the root, or remove "
                       "it (sudo rm " +
                       link + ")") != std::string::npos);
    }
    CHECK(test::snapshot_tree(root.path()) == before);
  }
}

TEST_CASE("refused setting flags say how to fix them", "[config][regression]") {
  TempDir root;
  test::ScopedEnv env;
  clean_env(env);
  auto replicas = cli({"plan", "--root", root.path(), "--replicas", "4"});
  CHECK(replicas.exit_code == 2);
  CHECK(replicas.err.find(
            "fix: add --variant time-slicing, or drop --replicas") !=
        std::string::npos);
  auto rename = cli({"plan", "--root", root.path(), "--rename-shared"});
  CHECK(rename.err.find(
            "fix: add --variant time-slicing, or drop --rename-shared") !=
        std::string::npos);
  auto range = cli({"plan", "--root", root.path(), "--variant", "time-slicing",
                    "--replicas", "1"});
  CHECK(range.err.find("fix: give --replicas a whole number from 2 to 1024") !=
        std::string::npos);
  auto variant = cli({"plan", "--root", root.path(), "--variant", "mig"});
  CHECK(variant.err.find(
            "fix: give --variant one of 'default' or 'time-slicing'") !=
        std::string::npos);
  // Any other refused flag points at the help.
  auto node = cli({"plan", "--root", root.path(), "--node", "Bad_Name"});
  CHECK(node.exit_code == 2);
  CHECK(node.err.find("fix: gpunode plan --help gives each flag's values") !=
        std::string::npos);
  auto timeout = cli({"status", "--root", root.path(), "--timeout", "soon"});
  CHECK(timeout.err.find("--timeout: expected a positive duration of at most "
                         "168h such as 10m, 90s or 1h30m, got 'soon'") !=
        std::string::npos);
  // The built-in default is said in words, not as CLI11's "=default".
  auto help = cli({"plan", "--help"});
  CHECK(help.out.find("TEXT=default") == std::string::npos);
  CHECK(help.out.find("TEXT=10m") == std::string::npos);
  CHECK(folded_space(help.out).find("else config.toml's timeout, else 10m") !=
        std::string::npos);
}
