#include "many_files_bundle.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "gpunode/bundle.hpp"
#include "gpunode/digest.hpp"

namespace gpunode::test {

ManyFilesBundle::ManyFilesBundle(std::size_t count) {
  bundle::Manifest m;
  m.created = "2026-11-29T10:00:00Z";
  m.gpunode_version = "0.1.0";
  for (std::size_t i = 0; i < count; ++i) {
    const std::string sub = "d" + std::to_string(i / 200);
    const std::string rel = sub + "/f" + std::to_string(i);
    if (i % 200 == 0) std::filesystem::create_directories(dir + "/" + sub);
    const std::string data = "file " + std::to_string(i) + "\n";
    std::ofstream(dir + "/" + rel, std::ios::binary) << data;
    const std::string sha = sha256_hex(data);
    m.files.push_back({rel, data.size(), sha, {sha}});
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const auto& a, const auto& b) { return a.path < b.path; });
  auto key = bundle::generate_keypair();
  if (!key) throw std::runtime_error("cannot make a key pair");
  const std::string text = bundle::write_manifest(m);
  write_text(dir + "/bundle.toml", text);
  auto sig = bundle::sign(key->private_pem, text);
  if (!sig) throw std::runtime_error("cannot sign bundle.toml");
  write_text(dir + "/bundle.toml.sig", *sig);
  write_text(pub, key->public_pem);
}

}  // namespace gpunode::test
