// What `bundle create` copies to run gpunode from the stick: the running
// binary for a plain build, the whole portable tree under the launcher.
#include "cli/self_files.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "gpunode/bundle.hpp"
#include "gpunode/bundle_create.hpp"
#include "gpunode/digest.hpp"
#include "oci_builder.hpp"
#include "test_support.hpp"

namespace gpunode::test {

namespace {
// A portable tree's shape, with stand-in files.
std::string make_tree(const TempDir& dir) {
  const std::string t = dir.path() + "/gpunode";
  write_text(t + "/bin/gpunode", "#!/bin/sh\n# launcher\n", 0755);
  write_text(t + "/lib/gpunode/ld-linux-x86-64.so.2", "loader", 0755);
  write_text(t + "/lib/gpunode/gpunode", "binary", 0755);
  write_text(t + "/lib/gpunode/libc.so.6", "libc", 0644);
  return t;
}

// The collection's place in a portable tree (packaging/build-portable.sh).
std::string collections_of(const std::string& tree) {
  return tree + "/share/ansible/collections";
}
constexpr const char* kCollection = "ansible_collections/gpunode/gpunode";

// make_tree with the Ansible collection, nested as Ansible wants it, and a
// collection of someone else's beside it (not gpunode's to ship).
std::string make_tree_with_collection(const TempDir& dir) {
  const std::string t = make_tree(dir);
  const std::string c = collections_of(t) + "/" + kCollection;
  write_text(c + "/galaxy.yml", "namespace: gpunode\nname: gpunode\n");
  write_text(c + "/plugins/modules/gpunode.py", "# module\n");
  write_text(c + "/roles/gpunode/defaults/main.yml", "---\n");
  write_text(collections_of(t) + "/ansible_collections/other/x/galaxy.yml",
             "name: x\n");
  return t;
}

// bundle create's options as the CLI sets them from the running tree.
bundle::CreateOptions options_for(const SelfFiles& s, const TempDir& dir) {
  bundle::CreateOptions o;
  o.out = dir.path() + "/stick";
  o.image_archives = {
      build_image(dir.path() + "/plugin.tar", ImageSpec{}).path};
  o.self_binary = s.binary;
  o.runtime_files = s.runtime_files;
  o.collections_root = s.collections_root;
  o.collection_files = s.collection_files;
  o.created = "2026-01-31T12:00:00Z";
  return o;
}

const std::string kLoader = "/lib/gpunode/ld-linux-x86-64.so.2";
}  // namespace

TEST_CASE("a plain build copies only itself", "[bundle]") {
  TempDir dir;
  write_text(dir.path() + "/gpunode", "binary", 0755);
  const SelfFiles s = *self_files_for(dir.path() + "/gpunode");
  CHECK(s.binary == dir.path() + "/gpunode");
  CHECK(s.runtime_files.empty());
  CHECK(s.collection_files.empty());
}

TEST_CASE("under the portable loader the whole tree is copied", "[bundle]") {
  TempDir dir;
  const std::string t = make_tree(dir);
  const SelfFiles s = *self_files_for(t + "/lib/gpunode/ld-linux-x86-64.so.2");
  CHECK(s.binary == t + "/bin/gpunode");
  CHECK(s.runtime_files ==
        std::vector<std::string>{t + "/lib/gpunode/gpunode",
                                 t + "/lib/gpunode/ld-linux-x86-64.so.2",
                                 t + "/lib/gpunode/libc.so.6"});
}

TEST_CASE("a loader outside a portable tree is not taken for one", "[bundle]") {
  TempDir dir;
  write_text(dir.path() + "/lib/x/ld-linux-x86-64.so.2", "loader", 0755);
  const SelfFiles s =
      *self_files_for(dir.path() + "/lib/x/ld-linux-x86-64.so.2");
  CHECK(s.runtime_files.empty());
}

TEST_CASE("bundle create lists and hashes every file of the portable tree",
          "[bundle]") {
  TempDir dir;
  const std::string t = make_tree(dir);
  const SelfFiles s = *self_files_for(t + "/lib/gpunode/ld-linux-x86-64.so.2");
  const BuiltImage plugin =
      build_image(dir.path() + "/plugin.tar", ImageSpec{});
  bundle::CreateOptions o;
  o.out = dir.path() + "/stick";
  o.image_archives = {plugin.path};
  o.self_binary = s.binary;
  o.runtime_files = s.runtime_files;
  o.created = "2026-01-31T12:00:00Z";
  auto report = bundle::create_bundle(o);
  REQUIRE(report.ok());
  std::vector<std::string> paths;
  for (const auto& f : report->manifest.files) paths.push_back(f.path);
  for (const char* p :
       {"bin/gpunode", "lib/gpunode/gpunode",
        "lib/gpunode/ld-linux-x86-64.so.2", "lib/gpunode/libc.so.6"}) {
    INFO(p);
    CHECK(std::find(paths.begin(), paths.end(), p) != paths.end());
  }
  CHECK(read_text(o.out + "/bin/gpunode") == "#!/bin/sh\n# launcher\n");
  bundle::VerifyOptions v;
  v.insecure_skip_signature = true;
  CHECK(bundle::verify_bundle(o.out, v).ok());
  // A changed library is named: the stick's runtime is covered too.
  flip_byte(o.out + "/lib/gpunode/libc.so.6", 0);
  auto bad = bundle::verify_bundle(o.out, v);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().exit == ExitCode::kIntegrity);
  CHECK(bad.error().message.find("lib/gpunode/libc.so.6") != std::string::npos);
}

TEST_CASE("the portable tree's Ansible collection is found, and only gpunode's",
          "[bundle]") {
  TempDir dir;
  const std::string t = make_tree_with_collection(dir);
  const SelfFiles s = *self_files_for(t + kLoader);
  CHECK(s.collections_root == collections_of(t));
  const std::string c = kCollection;
  CHECK(s.collection_files ==
        std::vector<std::string>{c + "/galaxy.yml",
                                 c + "/plugins/modules/gpunode.py",
                                 c + "/roles/gpunode/defaults/main.yml"});
}

TEST_CASE("a portable tree without the collection carries none", "[bundle]") {
  TempDir dir;
  const SelfFiles s = *self_files_for(make_tree(dir) + kLoader);
  CHECK(s.collections_root.empty());
  CHECK(s.collection_files.empty());
}

TEST_CASE("bundle create puts the collection under ansible/collections/",
          "[bundle]") {
  TempDir dir;
  const std::string t = make_tree_with_collection(dir);
  const auto o = options_for(*self_files_for(t + kLoader), dir);
  auto report = bundle::create_bundle(o);
  REQUIRE(report.ok());
  const std::string rel =
      std::string("ansible/collections/") + kCollection + "/galaxy.yml";
  const std::string module = std::string("ansible/collections/") + kCollection +
                             "/plugins/modules/gpunode.py";
  std::map<std::string, bundle::FileEntry> listed;
  for (const auto& f : report->manifest.files) listed[f.path] = f;
  for (const std::string& p :
       {rel, module,
        std::string("ansible/collections/") + kCollection +
            "/roles/gpunode/defaults/main.yml"}) {
    INFO(p);
    REQUIRE(listed.count(p) == 1);
    const std::string source =
        collections_of(t) + p.substr(std::string("ansible/collections").size());
    CHECK(listed[p].sha256 == sha256_hex(read_text(source)));
    CHECK(listed[p].size == read_text(source).size());
    CHECK(read_text(o.out + "/" + p) == read_text(source));
  }
  CHECK(listed.count("ansible/collections/ansible_collections/other/x/"
                     "galaxy.yml") == 0);
  // The nested directories get the bundle's fixed time, like the rest.
  const auto created = std::filesystem::last_write_time(o.out + "/bin");
  CHECK(std::filesystem::last_write_time(o.out + "/ansible/collections/" +
                                         kCollection + "/plugins/modules") ==
        created);
  bundle::VerifyOptions v;
  v.insecure_skip_signature = true;
  CHECK(bundle::verify_bundle(o.out, v).ok());
  // The collection is covered like every other file: a changed module is
  // named, exit 4.
  flip_byte(o.out + "/" + module, 0);
  auto bad = bundle::verify_bundle(o.out, v);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().exit == ExitCode::kIntegrity);
  CHECK(bad.error().message.find(module) != std::string::npos);
}

TEST_CASE("a symlink in the collection is refused and nothing is written",
          "[bundle]") {
  TempDir dir;
  const std::string t = make_tree_with_collection(dir);
  const std::string c = collections_of(t) + "/" + kCollection;
  std::string link;
  SECTION("a linked file") {
    link = c + "/plugins/modules/gpunode_facts.py";
    REQUIRE(::symlink("gpunode.py", link.c_str()) == 0);
  }
  SECTION("a linked directory") {
    link = c + "/roles/other";
    REQUIRE(::symlink("gpunode", link.c_str()) == 0);
  }
  SECTION("the collection itself a link") {
    link = c;
    std::filesystem::rename(c, dir.path() + "/elsewhere");
    REQUIRE(::symlink((dir.path() + "/elsewhere").c_str(), link.c_str()) == 0);
  }
  const SelfFiles s = *self_files_for(t + kLoader);
  const auto o = options_for(s, dir);
  auto report = bundle::create_bundle(o);
  REQUIRE_FALSE(report.ok());
  CHECK(report.error().exit == ExitCode::kUsage);
  CHECK(report.error().message == link +
                                      " is a symbolic link; a bundle carries "
                                      "no links");
  CHECK_FALSE(std::filesystem::exists(o.out));
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    INFO(e.path());
    CHECK(e.path().filename().string().rfind("stick", 0) != 0);
  }
}

}  // namespace gpunode::test
