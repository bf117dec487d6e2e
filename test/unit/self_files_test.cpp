// What `bundle create` copies to run gpunode from the stick: the running
// binary for a plain build, the whole portable tree under the launcher.
#include "cli/self_files.hpp"

#include <catch2/catch.hpp>

#include "gpunode/bundle.hpp"
#include "gpunode/bundle_create.hpp"
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
}  // namespace

TEST_CASE("a plain build copies only itself", "[bundle]") {
  TempDir dir;
  write_text(dir.path() + "/gpunode", "binary", 0755);
  const SelfFiles s = self_files_for(dir.path() + "/gpunode");
  CHECK(s.binary == dir.path() + "/gpunode");
  CHECK(s.runtime_files.empty());
}

TEST_CASE("under the portable loader the whole tree is copied", "[bundle]") {
  TempDir dir;
  const std::string t = make_tree(dir);
  const SelfFiles s = self_files_for(t + "/lib/gpunode/ld-linux-x86-64.so.2");
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
      self_files_for(dir.path() + "/lib/x/ld-linux-x86-64.so.2");
  CHECK(s.runtime_files.empty());
}

TEST_CASE("bundle create lists and hashes every file of the portable tree",
          "[bundle]") {
  TempDir dir;
  const std::string t = make_tree(dir);
  const SelfFiles s = self_files_for(t + "/lib/gpunode/ld-linux-x86-64.so.2");
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

}  // namespace gpunode::test
