// libFuzzer target: the OCI index / manifest / config reading of image
// archives (and docker archives' manifest.json), through the same streaming
// reader the image stage uses, over a tar built in memory.
//
// Input: documents separated by "--" lines. The first is index.json (or
// manifest.json when it starts with '['); document N >= 1 is stored as a
// blob under its own SHA-256. A fuzzer cannot guess hashes, so references
// are written as placeholders, replaced before the tar is built:
//   @N  ->  sha256:<hex of document N>      (descriptor digests, diff_ids)
//   #N  ->  blobs/sha256/<hex of document N> (docker archive paths)
//   %N  ->  the size of document N in bytes
// A document may refer only to documents after it (N is one digit), so the
// hashes resolve from the last document backwards.
#include <archive.h>
#include <archive_entry.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "gpunode/archive_handles.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/image_archive.hpp"

namespace {

using gpunode::sha256_hex;

// Replaces the placeholders that name documents after `self`.
std::string resolve(const std::string& doc, std::size_t self,
                    const std::vector<std::string>& hexes,
                    const std::vector<std::string>& docs) {
  std::string out;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const char c = doc[i];
    if ((c == '@' || c == '#' || c == '%') && i + 1 < doc.size() &&
        doc[i + 1] >= '1' && doc[i + 1] <= '9') {
      const std::size_t n = static_cast<std::size_t>(doc[i + 1] - '0');
      if (n > self && n < docs.size()) {
        if (c == '@') out += "sha256:" + hexes[n];
        if (c == '#') out += "blobs/sha256/" + hexes[n];
        if (c == '%') out += std::to_string(docs[n].size());
        ++i;
        continue;
      }
    }
    out += c;
  }
  return out;
}

void add_file(archive* a, const std::string& name, const std::string& data) {
  archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, name.c_str());
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
  if (archive_write_header(a, e) != ARCHIVE_OK) std::abort();
  if (archive_write_data(a, data.data(), data.size()) !=
      static_cast<la_ssize_t>(data.size()))
    std::abort();
  archive_entry_free(e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  auto docs = gpunode::fuzz::split_parts(data, size);
  if (docs.size() > 10) docs.resize(10);  // placeholders name 1..9
  std::vector<std::string> hexes(docs.size());
  for (std::size_t n = docs.size(); n-- > 0;) {
    docs[n] = resolve(docs[n], n, hexes, docs);
    hexes[n] = sha256_hex(docs[n]);
  }

  // Each tar entry costs a 512-byte header plus padding.
  std::string tar(size * 2 + 512 * (docs.size() + 4) + 10240, '\0');
  std::size_t used = 0;
  {
    gpunode::ArchiveWritePtr a(archive_write_new());
    archive_write_set_format_pax_restricted(a.get());
    if (archive_write_open_memory(a.get(), tar.data(), tar.size(), &used) !=
        ARCHIVE_OK)
      std::abort();
    const bool docker = !docs[0].empty() && docs[0][0] == '[';
    if (!docker)
      add_file(a.get(), "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    add_file(a.get(), docker ? "manifest.json" : "index.json", docs[0]);
    for (std::size_t n = 1; n < docs.size(); ++n) {
      bool dup = false;
      for (std::size_t m = 1; m < n; ++m) dup = dup || hexes[m] == hexes[n];
      if (!dup) add_file(a.get(), "blobs/sha256/" + hexes[n], docs[n]);
    }
    if (archive_write_close(a.get()) != ARCHIVE_OK) std::abort();
  }
  tar.resize(used);

  const std::string ref = "nvcr.io/nvidia/k8s-device-plugin:v0.19.3";
  (void)gpunode::peek_image_archive_bytes(tar, "fuzz.tar", ref);
  (void)gpunode::verify_image_archive_bytes(tar, "fuzz.tar", ref,
                                            "linux/amd64");
  return 0;
}
