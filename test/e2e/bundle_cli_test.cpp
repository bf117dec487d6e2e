// Drives the real binary through `bundle keygen`, `bundle create` and
// `bundle verify`: exit codes (0 / 2 / 4), the trust decision, and a bundle
// that was damaged after it was made.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpunode/bundle.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

using gpunode::test::build_image;
using gpunode::test::ImageSpec;
using gpunode::test::read_text;
using gpunode::test::Run;
using gpunode::test::run_gpunode;
using gpunode::test::snapshot_tree;
using gpunode::test::TempDir;

using gpunode::test::flip_byte;

namespace {

// keygen + create with one device-plugin image; returns the bundle path.
std::string make_bundle(const TempDir& tmp, bool signed_bundle = true) {
  Run k = run_gpunode({"bundle", "keygen", "--out", tmp.path() + "/publisher"});
  REQUIRE(k.exit_code == 0);
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  std::vector<std::string> args = {
      "bundle",          "create",
      "--out",           tmp.path() + "/bundle",
      "--image-archive", tmp.path() + "/plugin.tar",
      "--created",       "2026-11-29T10:00:00Z"};
  if (signed_bundle) {
    args.push_back("--sign-key");
    args.push_back(tmp.path() + "/publisher.key");
  }
  Run c = run_gpunode(args);
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  return tmp.path() + "/bundle";
}

void chmod_tree(const std::string& dir, unsigned dir_mode, unsigned file_mode) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    ::chmod(e.path().c_str(), e.is_directory() ? dir_mode : file_mode);
  ::chmod(dir.c_str(), dir_mode);
}

}  // namespace

TEST_CASE("bundle keygen writes a private and a public key, never twice",
          "[e2e][bundle]") {
  TempDir tmp;
  const std::string prefix = tmp.path() + "/k";
  Run r = run_gpunode({"bundle", "keygen", "--out", prefix});
  REQUIRE(r.exit_code == 0);
  const std::string pub = read_text(prefix + ".pub");
  CHECK(r.out ==
        "fingerprint: " + gpunode::bundle::key_fingerprint(pub) + "\n");
  struct stat st {};
  REQUIRE(::stat((prefix + ".key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  const auto before = snapshot_tree(tmp.path());
  Run again = run_gpunode({"bundle", "keygen", "--out", prefix});
  CHECK(again.exit_code == 2);
  CHECK_THAT(again.err, Catch::Contains("--out"));
  CHECK_THAT(again.err, Catch::Contains("refusing to overwrite"));
  CHECK(snapshot_tree(tmp.path()) == before);
  CHECK(run_gpunode({"bundle", "keygen"}).exit_code == 2);
}

TEST_CASE("bundle create then verify, a flipped byte is exit 4",
          "[e2e][bundle]") {
  TempDir tmp;
  const std::string bundle = make_bundle(tmp);
  const std::string pub = tmp.path() + "/publisher.pub";

  Run ok = run_gpunode({"bundle", "verify", bundle, "--trust-key", pub,
                        "--json", "--threads", "2"});
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK_THAT(ok.err, Catch::Contains("bundle verify: ok"));
  CHECK_THAT(ok.err, Catch::Contains("1 image,"));
  CHECK_THAT(ok.err, Catch::Contains("GB/s"));
  // The result is the last line (progress events come before it).
  auto j = nlohmann::json::parse(gpunode::test::last_line(ok.out));
  CHECK(j["event"] == "result");
  CHECK(j["status"] == "ok");
  CHECK(j["signed"] == true);
  CHECK(j["key_fingerprint"] ==
        gpunode::bundle::key_fingerprint(read_text(pub)));
  CHECK(j["images"] == 1);

  // Trusted through the node's key directory instead of the flag.
  TempDir root;
  std::filesystem::create_directories(root.path() +
                                      "/etc/gpunode/trusted-keys");
  std::filesystem::copy_file(
      pub, root.path() + "/etc/gpunode/trusted-keys/publisher.pub");
  CHECK(run_gpunode({"bundle", "verify", bundle, "--root", root.path()})
            .exit_code == 0);

  // Damage an image; verify names it and exits 4.
  std::string image;
  for (const auto& e : std::filesystem::directory_iterator(bundle + "/images"))
    image = e.path().filename().string();
  REQUIRE_FALSE(image.empty());
  flip_byte(bundle + "/images/" + image, 1000);
  const auto before = snapshot_tree(bundle);
  Run bad = run_gpunode({"bundle", "verify", bundle, "--trust-key", pub});
  CHECK(bad.exit_code == 4);
  CHECK_THAT(bad.err, Catch::Contains("images/" + image + ": bytes 0-"));
  CHECK(snapshot_tree(bundle) == before);
}

TEST_CASE("bundle verify insists on a trust decision", "[e2e][bundle]") {
  TempDir tmp;
  const std::string bundle = make_bundle(tmp, /*signed_bundle=*/false);

  Run none = run_gpunode({"bundle", "verify", bundle});
  CHECK(none.exit_code == 4);
  CHECK_THAT(none.err, Catch::Contains("--trust-key"));
  CHECK_THAT(none.err, Catch::Contains("--insecure-skip-signature"));

  Run skip =
      run_gpunode({"bundle", "verify", bundle, "--insecure-skip-signature"});
  CHECK(skip.exit_code == 0);
  CHECK_THAT(skip.err, Catch::Contains("NOT checked"));

  Run unsigned_with_key =
      run_gpunode({"bundle", "verify", bundle, "--trust-key",
                   tmp.path() + "/publisher.pub"});
  CHECK(unsigned_with_key.exit_code == 4);
  CHECK_THAT(unsigned_with_key.err, Catch::Contains("bundle is not signed"));
}

TEST_CASE("bundle verify usage errors are exit 2 naming the flag",
          "[e2e][bundle]") {
  TempDir tmp;
  Run missing_key = run_gpunode({"bundle", "verify", tmp.path(), "--trust-key",
                                 tmp.path() + "/nope.pub"});
  CHECK(missing_key.exit_code == 2);
  CHECK_THAT(missing_key.err, Catch::Contains("--trust-key"));
  Run threads = run_gpunode({"bundle", "verify", tmp.path(),
                             "--insecure-skip-signature", "--threads", "x"});
  CHECK(threads.exit_code == 2);
  CHECK_THAT(threads.err, Catch::Contains("--threads"));
  CHECK(run_gpunode({"bundle", "verify"}).exit_code == 2);
  CHECK(run_gpunode({"bundle"}).exit_code == 2);
}

TEST_CASE("a read-only bundle verifies (verify writes nothing)",
          "[e2e][bundle]") {
  TempDir tmp;
  const std::string bundle = make_bundle(tmp);
  chmod_tree(bundle, 0555, 0444);
  Run r = run_gpunode({"bundle", "verify", bundle, "--trust-key",
                       tmp.path() + "/publisher.pub"});
  chmod_tree(bundle, 0755, 0644);  // so TempDir can remove it
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("bundle create --registry-auth without --pull says it is not read",
          "[e2e][bundle][registry-auth]") {
  TempDir tmp;
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  // A file that does not exist: were it read, create would fail (exit 2).
  const std::string auth = tmp.path() + "/no-such-auth.json";
  Run c = run_gpunode({"bundle", "create", "--out", tmp.path() + "/bundle",
                       "--image-archive", tmp.path() + "/plugin.tar",
                       "--registry-auth", auth});
  INFO(c.err);
  CHECK(c.exit_code == 0);
  CHECK_THAT(c.err, Catch::Contains("--registry-auth " + auth +
                                    " is not read: nothing is pulled "
                                    "without --pull"));
}

TEST_CASE(
    "bundle create --pull USER:PASSWORD@HOST (no repository, with a port) is "
    "exit 2 and never prints the password",
    "[e2e][bundle][registry-auth]") {
  TempDir tmp;
  const std::string password = "Pw-7f3a9c";
  const auto before = snapshot_tree(tmp.path());
  for (const std::string& ref :
       {"alice:" + password + "@harbor.example.com",
        "alice:" + password + "@harbor.example.com:443"}) {
    INFO(ref);
    Run c = run_gpunode(
        {"bundle", "create", "--out", tmp.path() + "/bundle", "--pull", ref});
    CHECK(c.exit_code == 2);
    CHECK_THAT(c.err, Catch::Contains("[ERROR registry] --pull ...@"));
    CHECK_THAT(c.err, Catch::Contains("neither sends nor prints"));
    CHECK_THAT(c.err + c.out, !Catch::Contains(password));
    CHECK(snapshot_tree(tmp.path()) == before);
  }
}

TEST_CASE(
    "the bundle's install.sh starts from a relative path that begins with "
    "'-'",
    "[e2e][bundle]") {
  TempDir tmp;
  const std::string stick = tmp.path() + "/-stick";
  build_image(tmp.path() + "/plugin.tar", ImageSpec{});
  Run c = run_gpunode({"bundle", "create", "--out", stick, "--image-archive",
                       tmp.path() + "/plugin.tar", "--created",
                       "2026-11-29T10:00:00Z"});
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  const auto before = snapshot_tree(stick);
  // From the stick's parent, as `cd /media/usb && sh -- -stick/install.sh`.
  // A --root that is no directory ends gpunode at its first check, after it
  // took the bundle's path: what is proven is that the stick's own binary
  // ran, given --bundle ./-stick (not dirname's usage error, exit 127, nor
  // "-stick" read as an option).
  Run r = gpunode::test::run_with_sim({"env", "-C", tmp.path(), "sh", "--",
                                       "-stick/install.sh", "--root",
                                       tmp.path() + "/no-such-root", "--json"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, !Catch::Contains("dirname"));
  CHECK_THAT(r.err, Catch::Contains("--root: '" + tmp.path() +
                                    "/no-such-root' is not a directory"));
  CHECK(snapshot_tree(stick) == before);
}
