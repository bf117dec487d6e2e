#include "cli/self_files.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpunode {

namespace fs = std::filesystem;

namespace {

// The collection gpunode ships, below <tree>/share/ansible/collections. Only
// it is taken, not the whole collections directory: installed from the .deb
// the tree is /usr, and /usr/share/ansible/collections is Ansible's default
// search path (ansible-config dump | grep COLLECTIONS_PATHS), shared with
// whatever else the host installed there.
constexpr const char* kCollection = "ansible_collections/gpunode/gpunode";

// Every entry below root/kCollection that is not a directory, relative to
// root, sorted; none when the tree has no collection. The walk never follows
// a symlink (the iterator's default) and lists it, so that bundle create
// refuses it by name. A directory it cannot read is an error, not a stick
// with part of the collection.
Result<std::vector<std::string>> collection_files(const fs::path& root) {
  std::vector<std::string> out;
  const fs::path top = root / kCollection;
  std::error_code ec;
  const auto st = fs::symlink_status(top, ec);
  if (!fs::exists(st)) return out;
  if (fs::is_symlink(st)) return std::vector<std::string>{kCollection};
  fs::recursive_directory_iterator it(top, ec);
  for (const fs::recursive_directory_iterator end; !ec && it != end;
       it.increment(ec)) {
    if (!it->is_directory(ec) || it->is_symlink(ec))
      out.push_back(it->path().lexically_relative(root).string());
  }
  if (ec) {
    return Error{ExitCode::kBlocked,
                 "bundle",
                 "cannot list the Ansible collection in " + top.string() +
                     ": " + ec.message(),
                 {}};
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Result<SelfFiles> self_files_for(const std::string& exe) {
  const fs::path p(exe);
  const fs::path lib = p.parent_path();
  const fs::path tree = lib.parent_path().parent_path();
  const fs::path launcher = tree / "bin" / "gpunode";
  std::error_code ec;
  const bool portable = p.filename().string().rfind("ld-linux", 0) == 0 &&
                        lib.filename() == "gpunode" &&
                        lib.parent_path().filename() == "lib" &&
                        fs::is_regular_file(lib / "gpunode", ec) &&
                        fs::is_regular_file(launcher, ec);
  SelfFiles out;
  if (!portable) {
    out.binary = exe;
    return out;
  }
  out.binary = launcher.string();
  for (const auto& entry : fs::directory_iterator(lib, ec)) {
    if (entry.is_regular_file(ec)) out.runtime_files.push_back(entry.path());
  }
  // Sorted, so bundles stay reproducible.
  std::sort(out.runtime_files.begin(), out.runtime_files.end());
  const fs::path collections = tree / "share" / "ansible" / "collections";
  auto listed = collection_files(collections);
  if (!listed) return listed.error();
  out.collection_files = std::move(*listed);
  if (!out.collection_files.empty()) out.collections_root = collections;
  return out;
}

Result<SelfFiles> locate_self() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return Error{ExitCode::kBlocked,
                 "bundle",
                 std::string("cannot find this binary (/proc/self/exe): ") +
                     std::strerror(errno),
                 {}};
  return self_files_for(std::string(self, static_cast<std::size_t>(n)));
}

}  // namespace gpunode
