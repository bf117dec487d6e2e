#include "stages/package_copies.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "gpunode/digest.hpp"
#include "gpunode/unique_fd.hpp"

namespace gpunode {
namespace {

constexpr const char* kDirPrefix = "toolkit-packages.";

Error copy_failed(const PackageToCopy& p, const std::string& why) {
  return Error{ExitCode::kBlocked, "toolkit",
               "cannot copy the bundle's " + p.name +
                   " off the stick before installing it: " + why,
               "check the stick and the free space of gpunode's state dir, "
               "then run install again"};
}

// Copies `p.source` to `dest`, hashing what it reads; the file on the stick
// must be a regular file, never followed through a symbolic link.
Result<void> copy_verified(const PackageToCopy& p, const std::string& dest) {
  UniqueFd in(::open(p.source.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in) return copy_failed(p, std::strerror(errno));
  struct stat st {};
  if (::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return copy_failed(p, "it is not a regular file");
  UniqueFd out(::open(dest.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      0600));
  if (!out) return copy_failed(p, dest + ": " + std::strerror(errno));
  Sha256 sha;
  if (!sha.ok()) return copy_failed(p, "OpenSSL cannot hash");
  std::vector<char> buf(1 << 20);
  for (;;) {
    const ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return copy_failed(p, std::string("read: ") + std::strerror(errno));
    if (n == 0) break;
    sha.update(buf.data(), static_cast<std::size_t>(n));
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out.get(), buf.data() + done,
                                static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return copy_failed(p, dest + ": " + std::strerror(errno));
      done += w;
    }
  }
  const std::string got = sha.hex();
  if (got != p.sha256) {
    return Error{ExitCode::kIntegrity, "toolkit",
                 p.name +
                     " on the stick no longer matches bundle.toml (sha256 " +
                     got + ", bundle.toml says " + p.sha256 +
                     "): it changed after the bundle was verified; nothing "
                     "was installed",
                 "the stick is failing or was changed: copy the bundle "
                 "again, check it with gpunode bundle verify DIR, and rerun "
                 "install"};
  }
  return {};
}

// What an interrupted run left: removed under the run lock, so a rerun
// converges instead of filling the state dir.
void remove_leftovers(const std::string& state_dir_real) {
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(state_dir_real, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kDirPrefix, 0) == 0 && e.is_directory(ec) &&
        !e.is_symlink(ec))
      std::filesystem::remove_all(e.path(), ec);
  }
}

}  // namespace

Result<PackageCopies> PackageCopies::make(
    const std::string& state_dir_real,
    const std::vector<PackageToCopy>& packages) {
  remove_leftovers(state_dir_real);
  std::string tmpl = state_dir_real + "/" + kDirPrefix + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Error{ExitCode::kBlocked, "toolkit",
                 "cannot make a directory in gpunode's state dir " +
                     state_dir_real +
                     " for the toolkit packages: " + std::strerror(errno),
                 "check that directory (and --state-dir), then run install "
                 "again"};
  }
  PackageCopies copies;
  copies.dir_ = tmpl;
  for (const PackageToCopy& p : packages) {
    const std::string dest =
        copies.dir_ + "/" + std::filesystem::path(p.name).filename().string();
    if (auto done = copy_verified(p, dest); !done) return done.error();
    copies.paths_.push_back(dest);
  }
  return Result<PackageCopies>(std::move(copies));
}

PackageCopies::PackageCopies(PackageCopies&& other) noexcept
    : dir_(std::move(other.dir_)), paths_(std::move(other.paths_)) {
  other.dir_.clear();
}

PackageCopies::~PackageCopies() {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace gpunode
