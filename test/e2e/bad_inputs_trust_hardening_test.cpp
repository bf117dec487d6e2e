// The bad-input corpus, issue 11 (hardening) for trust and the cluster:
// --insecure-skip-signature while a key is trusted (exit 2, naming both),
// trust anchors others may write (exit 5, naming the path and the fix), a
// kubeconfig with two entries of one name (exit 2, as kubectl) and a node
// name the cluster does not know (exit 2, found in preflight). The runner
// (bad_inputs_runner.cpp) proves nothing outside the state dir changed.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "bad_inputs.hpp"
#include "gpunode/bundle.hpp"

using namespace gpunode::test;
using namespace gpunode::test::bad;

namespace {

std::string toml(const Env& e) { return e.bundle + "/bundle.toml"; }
std::string sig(const Env& e) { return e.bundle + "/bundle.toml.sig"; }
std::string keys_dir(const Env& e) {
  return e.root + "/etc/gpunode/trusted-keys";
}
std::string kubeconfig(const Env& e) {
  return e.root + "/etc/rancher/k3s/k3s.yaml";
}

// Signs bundle.toml again with a key nobody trusts.
void resign_with_other_key(Env& e) {
  auto other = gpunode::bundle::generate_keypair();
  REQUIRE(other);
  auto signature =
      gpunode::bundle::sign(other->private_pem, read_text(toml(e)));
  REQUIRE(signature);
  write_text(sig(e), *signature);
}

// A copy of the publisher's key in the scratch dir, to loosen.
std::string key_copy(const Env& e, const std::string& name = "good.pub") {
  const std::string path = e.dir + "/keys/" + name;
  write_text(path, read_text(e.key_pub));
  REQUIRE(::chmod((e.dir + "/keys").c_str(), 0755) == 0);
  return path;
}

void chmod_or_fail(const std::string& path, mode_t mode) {
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

// install --bundle with `args` after `damage`.
BadInput bundle_case(std::string name, std::function<void(Env&)> damage,
                     std::function<std::vector<std::string>(Env&)> args,
                     int code, std::string fragment) {
  return {std::move(name),
          "good-v3",
          kBundle,
          [damage, args](Env& e) {
            damage(e);
            std::vector<std::string> a{"--bundle", e.bundle};
            const auto more = args(e);
            a.insert(a.end(), more.begin(), more.end());
            return e.install(a);
          },
          code,
          std::move(fragment)};
}

std::vector<std::string> skip_flag(Env&) {
  return {"--insecure-skip-signature"};
}
std::vector<std::string> trust_copy(Env& e) {
  return {"--trust-key", e.dir + "/keys/good.pub"};
}
void nothing(Env&) {}

// A second entry named "default" in `list` of k3s's kubeconfig, pointing
// elsewhere: which one is meant would be a guess.
void duplicate(Env& e, const std::string& list, const std::string& entry) {
  sed(kubeconfig(e), list + ":\n", list + ":\n" + entry);
}

}  // namespace

TEST_CASE("bad inputs: trust hardening, skipping the signature",
          "[e2e][bad-inputs]") {
  const std::vector<BadInput> cases = {
      bundle_case(
          "re-signed by another key, --trust-key and "
          "--insecure-skip-signature",
          [](Env& e) {
            resign_with_other_key(e);
            key_copy(e);
          },
          [](Env& e) {
            return std::vector<std::string>{"--trust-key",
                                            e.dir + "/keys/good.pub",
                                            "--insecure-skip-signature"};
          },
          2,
          "--insecure-skip-signature: refused, a key is trusted: --trust-key"),
      bundle_case(
          "unsigned, key in the trusted-keys dir, --insecure-skip-signature",
          [](Env& e) {
            ::unlink(sig(e).c_str());
            write_text(keys_dir(e) + "/publisher.pub", read_text(e.key_pub));
          },
          skip_flag, 2, "trusted-keys/publisher.pub"),
      {"re-signed, GPUNODE_TRUST_KEYS set, --insecure-skip-signature",
       "good-v3", kBundle,
       [](Env& e) {
         resign_with_other_key(e);
         e.env.push_back("GPUNODE_TRUST_KEYS=" + key_copy(e));
         return e.install({"--bundle", e.bundle, "--insecure-skip-signature"});
       },
       2, "a key is trusted: GPUNODE_TRUST_KEYS"},
      {"re-signed, config.toml trust-keys, --insecure-skip-signature",
       "good-v3", kBundle,
       [](Env& e) {
         resign_with_other_key(e);
         write_text(e.root + "/etc/gpunode/keys/site.pub",
                    read_text(e.key_pub));
         write_text(e.root + "/etc/gpunode/config.toml",
                    "trust-keys = [\"/etc/gpunode/keys/site.pub\"]\n");
         return e.install({"--bundle", e.bundle, "--insecure-skip-signature"});
       },
       2, "etc/gpunode/config.toml:1"},
  };
  run_table("skip signature", cases);
}

TEST_CASE("bad inputs: trust hardening, loose trust anchors",
          "[e2e][bad-inputs]") {
  const std::vector<BadInput> cases = {
      bundle_case(
          "--trust-key world-writable",
          [](Env& e) { chmod_or_fail(key_copy(e), 0666); }, trust_copy, 5,
          "chmod go-w "),
      bundle_case(
          "--trust-key owned by another user",
          [](Env& e) {
            const std::string k = key_copy(e);
            REQUIRE(::chown(k.c_str(), 4321, 4321) == 0);
          },
          trust_copy, 5, "is owned by uid 4321"),
      bundle_case(
          "--trust-key in a group-writable directory",
          [](Env& e) {
            key_copy(e);
            chmod_or_fail(e.dir + "/keys", 0775);
          },
          trust_copy, 5, "/keys is writable by its group"),
      bundle_case(
          "trusted-keys directory world-writable, even empty",
          [](Env& e) {
            write_text(keys_dir(e) + "/.keep", "");
            chmod_or_fail(keys_dir(e), 0777);
            key_copy(e);
          },
          trust_copy, 5, "trusted-keys directory"),
      bundle_case(
          "key in the trusted-keys directory group-writable",
          [](Env& e) {
            write_text(keys_dir(e) + "/publisher.pub", read_text(e.key_pub),
                       0664);
          },
          [](Env&) { return std::vector<std::string>{}; }, 5, "chmod go-w "),
      bundle_case(
          "a parent of the trusted-keys directory world-writable",
          [](Env& e) {
            write_text(keys_dir(e) + "/publisher.pub", read_text(e.key_pub));
            chmod_or_fail(e.root + "/etc/gpunode", 0777);
          },
          [](Env&) { return std::vector<std::string>{}; }, 5,
          "etc/gpunode is writable by everyone"),
  };
  run_table("trust anchors", cases);
}

TEST_CASE("bad inputs: trust hardening, kubeconfig names and the node",
          "[e2e][bad-inputs]") {
  const std::vector<BadInput> cases = {
      damaged(
          "kubeconfig: two clusters named default", "good-v3",
          [](Env& e) {
            duplicate(e, "clusters",
                      "- cluster:\n    server: https://192.0.2.1:6443\n"
                      "  name: default\n");
          },
          2, "clusters has two entries named \"default\""),
      damaged(
          "kubeconfig: two users named default", "good-v3",
          [](Env& e) {
            duplicate(e, "users", "- name: default\n  user:\n    token: x\n");
          },
          2, "users has two entries named \"default\""),
      damaged(
          "kubeconfig: two contexts named default", "good-v3",
          [](Env& e) {
            duplicate(e, "contexts",
                      "- context:\n    cluster: default\n    user: default\n"
                      "  name: default\n");
          },
          2, "contexts has two entries named \"default\""),
      damaged("--node valid but not in the cluster", "good-v3", nothing, 2,
              "node gpu-node-9 (--node) is not in the cluster (its nodes: "
              "gpu-node-1)",
              {"--node", "gpu-node-9"}),
  };
  run_table("cluster", cases);
}
