// Drives the real gpunode binary: flags, exit codes, output formats.
#include <catch2/catch.hpp>

#include "test_support.hpp"

using gpunode::test::Run;
using gpunode::test::run_gpunode;
using gpunode::test::TempDir;

TEST_CASE("version prints the version and the stage list", "[cli]") {
  Run r = run_gpunode({"version"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("gpunode "));
  CHECK_THAT(r.out,
             Catch::Contains("preflight driver toolkit handler runtimeclass "
                             "image labels plugin allocatable smoke"));
}

TEST_CASE("help answers with exit 0 and lists the exit codes", "[cli]") {
  Run r = run_gpunode({"--help"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("Exit codes"));
  CHECK_THAT(r.out, Catch::Contains("install"));
}
