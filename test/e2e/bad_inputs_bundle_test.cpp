// The bad-input corpus, what the operator carries: the bundle (bundle.toml,
// its signature, the files it lists), trust keys, and image archives given
// with --image-archive (checked against a real containerd). Each case: exit
// code per DESIGN.md's table (4 for a bundle or archive that does not
// verify, 2 for one that is malformed or unsafe), a message fragment naming
// the file, and nothing changed (bad_inputs_runner.cpp checks that, the
// bundle itself included: it is never written).
#include <unistd.h>

#include <catch2/catch.hpp>

#include "bad_inputs.hpp"
#include "gpunode/bundle.hpp"
#include "oci_builder.hpp"

using namespace gpunode::test;
using namespace gpunode::test::bad;

namespace {

const std::string kImage = "images/k8s-device-plugin-v0.19.3.tar";

std::string toml(const Env& e) { return e.bundle + "/bundle.toml"; }
std::string sig(const Env& e) { return e.bundle + "/bundle.toml.sig"; }

// install --bundle, signature checked against the publisher's key.
BadInput signed_case(std::string name, std::function<void(Env&)> damage,
                     int code, std::string fragment) {
  return {std::move(name),
          "good-v3",
          kBundle,
          [damage](Env& e) {
            damage(e);
            return e.install({"--bundle", e.bundle, "--trust-key", e.key_pub});
          },
          code,
          std::move(fragment)};
}

// install --bundle --insecure-skip-signature: bundle.toml itself is read.
BadInput unsigned_case(std::string name, std::function<void(Env&)> damage,
                       int code, std::string fragment) {
  return {
      std::move(name),
      "good-v3",
      kBundle,
      [damage](Env& e) {
        damage(e);
        return e.install({"--bundle", e.bundle, "--insecure-skip-signature"});
      },
      code,
      std::move(fragment)};
}

// The first [[files]] entry's lines, to duplicate or damage.
std::string first_file_entry(const std::string& text) {
  const auto at = text.find("[[files]]");
  const auto end = text.find("\n\n", at);
  return text.substr(
      at, end == std::string::npos ? std::string::npos : end - at + 1);
}

// Signs bundle.toml again with the publisher's own key (what someone holding
// it, or a publisher's broken pipeline, could ship): the signature is good,
// so only what verify checks beyond it can catch the edit.
void resign(const Env& e) {
  const std::string pub = e.key_pub;
  const std::string key = read_text(pub.substr(0, pub.size() - 4) + ".key");
  auto signature = gpunode::bundle::sign(key, read_text(toml(e)));
  REQUIRE(signature);
  write_text(sig(e), *signature);
}

// The device plugin's [[images]] digest replaced by another, re-signed.
void another_image_digest(Env& e) {
  const std::string text = read_text(toml(e));
  const auto images = text.find("[[images]]");
  const auto at = text.find("digest = \"sha256:", images);
  REQUIRE(at != std::string::npos);
  sed(toml(e), text.substr(at, 17 + 64 + 1),
      "digest = \"sha256:" + std::string(64, 'e') + "\"");
  resign(e);
}

}  // namespace

TEST_CASE("bad inputs: signatures and trust keys", "[e2e][bad-inputs]") {
  const std::vector<BadInput> cases = {
      signed_case(
          "signature missing, key trusted",
          [](Env& e) { ::unlink(sig(e).c_str()); }, 4, "bundle is not signed"),
      {"signed by another key", "good-v3", kBundle,
       [](Env& e) {
         Run k = run_gpunode({"bundle", "keygen", "--out", e.dir + "/other"});
         REQUIRE(k.exit_code == 0);
         return e.install(
             {"--bundle", e.bundle, "--trust-key", e.dir + "/other.pub"});
       },
       4, "bundle.toml: signature does not match any trusted key"},
      signed_case(
          "signature truncated", [](Env& e) { truncate_to(sig(e), 20); }, 4,
          "bundle.toml.sig: is 20 bytes"),
      signed_case(
          "signature of a different bundle.toml",
          [](Env& e) {
            sed(toml(e), "min_driver = ", "# edited\nmin_driver = ");
          },
          4, "signature does not match any trusted key"),
      signed_case(
          "signature a directory", [](Env& e) { replace_with_dir(sig(e)); }, 4,
          "bundle.toml.sig: is not a regular file"),
      signed_case(
          "signature a FIFO (a read would block)",
          [](Env& e) { replace_with_fifo(sig(e)); }, 4, "bundle.toml.sig"),
      {"no trusted key and no explicit skip", "good-v3", kBundle,
       [](Env& e) {
         return e.install({"--bundle", e.bundle});
       },
       4, "--insecure-skip-signature"},
      {"trust key not a PEM key", "good-v3", kBundle,
       [](Env& e) {
         write_text(e.dir + "/junk.pub", "ssh-ed25519 AAAA not pem\n");
         return e.install(
             {"--bundle", e.bundle, "--trust-key", e.dir + "/junk.pub"});
       },
       2, "--trust-key"},
      {"trust key a directory", "good-v3", kBundle,
       [](Env& e) {
         return e.install({"--bundle", e.bundle, "--trust-key", e.dir});
       },
       2, "--trust-key"},
      {"trust key a FIFO (a read would block)", "good-v3", kBundle,
       [](Env& e) {
         replace_with_fifo(e.dir + "/fifo.pub");
         return e.install(
             {"--bundle", e.bundle, "--trust-key", e.dir + "/fifo.pub"});
       },
       2, "--trust-key"},
  };
  run_table("signatures", cases);
}

TEST_CASE("bad inputs: bundle.toml", "[e2e][bad-inputs]") {
  std::vector<BadInput> cases = {
      unsigned_case(
          "unknown format version",
          [](Env& e) {
            sed(toml(e), "format_version = 1", "format_version = 7");
          },
          2, "format version 7 is not supported"),
      unsigned_case(
          "not TOML",
          [](Env& e) { write_text(toml(e), "[[files]\npath = \n"); }, 2,
          "bundle.toml:"),
      unsigned_case(
          "a field missing",
          [](Env& e) { sed(toml(e), "created = ", "# created = "); }, 2,
          "missing key \"created\""),
      unsigned_case(
          "a path with ..",
          [](Env& e) { sed(toml(e), "path = \"", "path = \"../../etc/"); }, 2,
          "../../etc/"),
      unsigned_case(
          "an absolute path",
          [](Env& e) { sed(toml(e), "path = \"", "path = \"/etc/"); }, 2,
          "/etc/"),
      unsigned_case(
          "a file listed twice",
          [](Env& e) {
            const std::string text = read_text(toml(e));
            write_text(toml(e), text + "\n" + first_file_entry(text));
          },
          2, "is listed twice"),
      unsigned_case(
          "1 GB (sparse)", [](Env& e) { truncate_to(toml(e), 1LL << 30); }, 4,
          "bundle.toml: is 1073741824 bytes"),
      unsigned_case(
          "a directory in its place", [](Env& e) { replace_with_dir(toml(e)); },
          4, "bundle.toml: is not a regular file"),
      unsigned_case(
          "a FIFO in its place (a read would block)",
          [](Env& e) { replace_with_fifo(toml(e)); }, 4,
          "bundle.toml: is not a regular file"),
      unsigned_case(
          "missing", [](Env& e) { ::unlink(toml(e).c_str()); }, 4,
          "has no bundle.toml"),
      {"--bundle through a regular file (ENOTDIR)", "good-v3", kBundle,
       [](Env& e) {
         return e.install({"--bundle", e.bundle + "/install.sh/x",
                           "--insecure-skip-signature"});
       },
       2, "--bundle"},
  };
  // Signed with the trusted key, every file hash right: only the image's
  // own index.json says the recorded digest is wrong.
  cases.push_back(
      signed_case("a re-signed image digest that is not the "
                  "archive's (install)",
                  another_image_digest, 4,
                  "image \"device-plugin\" "
                  "(nvcr.io/nvidia/k8s-device-plugin:v0.19.3): "
                  "bundle.toml records digest sha256:eeee"));
  cases.push_back(
      {"a re-signed image digest that is not the archive's "
       "(bundle verify)",
       "good-v3", kBundle,
       [](Env& e) {
         another_image_digest(e);
         return std::vector<std::string>{"bundle", "verify", e.bundle,
                                         "--trust-key", e.key_pub};
       },
       4, "image \"device-plugin\""});
  run_table("bundle.toml", cases);
}

TEST_CASE("bad inputs: files in the bundle", "[e2e][bad-inputs]") {
  const std::vector<BadInput> cases = {
      signed_case(
          "a flipped byte in a manifest",
          [](Env& e) {
            flip_byte(e.bundle + "/manifests/runtimeclass-nvidia.yml", 10);
          },
          4, "manifests/runtimeclass-nvidia.yml"),
      signed_case(
          "a flipped byte in the image",
          [](Env& e) { flip_byte(e.bundle + "/" + kImage, 4096); }, 4, kImage),
      signed_case(
          "the image truncated",
          [](Env& e) { truncate_to(e.bundle + "/" + kImage, 1000); }, 4,
          kImage),
      signed_case(
          "an extra file",
          [](Env& e) { write_text(e.bundle + "/images/x.tar", "x"); }, 4,
          "images/x.tar: is not listed in bundle.toml"),
      signed_case(
          "a manifest replaced by a symlink",
          [](Env& e) {
            const std::string m =
                e.bundle + "/manifests/runtimeclass-nvidia.yml";
            ::unlink(m.c_str());
            REQUIRE(::symlink("/etc/passwd", m.c_str()) == 0);
          },
          4, "manifests/runtimeclass-nvidia.yml"),
      signed_case(
          "a FIFO in place of a listed file",
          [](Env& e) {
            replace_with_fifo(e.bundle + "/manifests/runtimeclass-nvidia.yml");
          },
          4, "manifests/runtimeclass-nvidia.yml: is a FIFO"),
  };
  run_table("bundle files", cases);
}

TEST_CASE("bad inputs: image archives", "[e2e][bad-inputs][containerd]") {
  auto damaged =
      [](std::string name, Damage damage, int code, std::string fragment,
         std::vector<std::string> platforms = {"linux/amd64", "linux/arm64"}) {
        return BadInput{
            std::move(name),
            "good-v3",
            kContainerd,
            [damage, platforms](Env& e) {
              ImageSpec spec;
              spec.platforms = platforms;
              build_image(e.dir + "/dp.tar", spec, ArchiveFormat::kOciLayout,
                          Compression::kNone, damage);
              return e.install({"--image-archive", e.dir + "/dp.tar"});
            },
            code,
            std::move(fragment)};
      };
  auto path = [](std::string name, std::function<std::string(Env&)> make,
                 std::string fragment) {
    return BadInput{std::move(name),
                    "good-v3",
                    kContainerd,
                    [make](Env& e) {
                      return e.install({"--image-archive", make(e)});
                    },
                    2,
                    std::move(fragment)};
  };
  const std::vector<BadInput> cases = {
      damaged("truncated", Damage::kTruncated, 4, "truncated"),
      damaged("a flipped byte in a layer", Damage::kCorruptLayer, 4,
              "is corrupt"),
      damaged("not a tar", Damage::kNotATar, 2, "not a tar archive"),
      damaged("a path traversal entry", Damage::kPathTraversal, 2,
              "climbs out"),
      damaged("a symlink entry", Damage::kSymlinkEntry, 2, "symbolic link"),
      damaged("no index", Damage::kMissingIndex, 2, "neither index.json"),
      damaged("another platform only", Damage::kNone, 2, "platform linux/amd64",
              {"linux/arm64"}),
      {"flipped byte in the gzip stream", "good-v3", kContainerd,
       [](Env& e) {
         const std::string a = e.dir + "/dp.tar.gz";
         build_image(a, ImageSpec{}, ArchiveFormat::kOciLayout,
                     Compression::kGzip);
         flip_byte(a, 2000);
         return e.install({"--image-archive", a});
       },
       4, "dp.tar.gz"},
      path(
          "a directory", [](Env& e) { return e.dir; }, "--image-archive: '"),
      path(
          "a FIFO (a read would block)",
          [](Env& e) {
            replace_with_fifo(e.dir + "/dp.tar");
            return e.dir + "/dp.tar";
          },
          "is not a regular file"),
      path(
          "1 GB of zeros (sparse)",
          [](Env& e) {
            write_text(e.dir + "/zeros.tar", "");
            truncate_to(e.dir + "/zeros.tar", 1LL << 30);
            return e.dir + "/zeros.tar";
          },
          "neither index.json"),
      path(
          "missing", [](Env& e) { return e.dir + "/nope.tar"; },
          "does not exist"),
  };
  run_table("image archive", cases);
}
