// make_test_image: writes a synthetic device plugin image archive with the
// test builder, for the demo and for trying gpunode by hand.
//   make_test_image OUT [--mib N] [--docker] [--gzip|--zstd] [--damage NAME]
//                   [--ref REF] [--platform os/arch]...
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "oci_builder.hpp"

using namespace gpunode::test;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: make_test_image OUT [--mib N] [--docker] [--gzip|--zstd] "
        "[--damage NAME] [--ref REF] [--platform os/arch]...\n");
    return 2;
  }
  const std::map<std::string, Damage> damages = {
      {"truncated", Damage::kTruncated},
      {"corrupt-layer", Damage::kCorruptLayer},
      {"missing-blob", Damage::kMissingBlob},
      {"missing-index", Damage::kMissingIndex},
      {"symlink", Damage::kSymlinkEntry},
      {"path-traversal", Damage::kPathTraversal},
      {"not-a-tar", Damage::kNotATar}};
  ImageSpec spec;
  ArchiveFormat format = ArchiveFormat::kOciLayout;
  Compression compression = Compression::kNone;
  Damage damage = Damage::kNone;
  bool platforms_given = false;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "make_test_image: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--mib") {
      spec.layer_bytes =
          std::strtoull(value().c_str(), nullptr, 10) * 1024 * 1024;
    } else if (a == "--docker") {
      format = ArchiveFormat::kDockerArchive;
    } else if (a == "--gzip") {
      compression = Compression::kGzip;
    } else if (a == "--zstd") {
      compression = Compression::kZstd;
    } else if (a == "--ref") {
      spec.ref_name = value();
    } else if (a == "--platform") {
      if (!platforms_given) spec.platforms.clear();
      platforms_given = true;
      spec.platforms.push_back(value());
    } else if (a == "--damage") {
      auto it = damages.find(value());
      if (it == damages.end()) {
        std::fprintf(stderr, "make_test_image: unknown damage\n");
        return 2;
      }
      damage = it->second;
    } else {
      std::fprintf(stderr, "make_test_image: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  BuiltImage built = build_image(argv[1], spec, format, compression, damage);
  std::printf("%s: %s, %llu bytes, %s\n", argv[1], spec.ref_name.c_str(),
              static_cast<unsigned long long>(built.bytes),
              built.index_digest.c_str());
  return 0;
}
