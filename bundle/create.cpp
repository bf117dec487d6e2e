// `gpunode bundle create`: lays out a bundle directory (DESIGN.md, "Bundle").
//
// Everything is written into a temporary sibling `<out>.partial-XXXXXX` and
// renamed into place only when complete, so a directory named like the
// bundle is always a whole bundle; on any failure the partial directory is
// removed. Inputs are read once: each file is hashed (whole and per chunk)
// while it is copied. The result is reproducible: fixed modes, sorted
// manifest, every mtime set to the `created` time.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpunode/bundle.hpp"
#include "gpunode/bundle_create.hpp"
#include "gpunode/crash_point.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/image_archive.hpp"
#include "gpunode/images_lock.hpp"
#include "gpunode/progress_piece.hpp"
#include "gpunode/toolkit_package_set.hpp"
#include "gpunode/unique_fd.hpp"
#include "gpunode/utc_time.hpp"
#include "gpunode/work_limits.hpp"
#include "manifests_data.hpp"

namespace gpunode::bundle {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLayer = "bundle";
// Where the Ansible collection goes: ANSIBLE_COLLECTIONS_PATH on the
// controller (README, "Portable binary and packages").
constexpr const char* kCollectionsDir = "ansible/collections";
// `dirname --` and the "./" keep a bundle reached through a relative path
// that starts with '-' (sh -- -stick/install.sh) from being read as options,
// by dirname and then by gpunode's --bundle.
constexpr const char* kInstallSh =
    "#!/bin/sh\n"
    "# gpunode offline bundle: installs from this directory; safe to rerun.\n"
    "d=$(dirname -- \"$0\")\n"
    "case \"$d\" in -*) d=\"./$d\" ;; esac\n"
    "exec \"$d/bin/gpunode\" install --bundle \"$d\" \"$@\"\n";

Error io_error(const std::string& what, int err) {
  // Out of descriptors or memory is this machine's limit, not the input's.
  if (auto limit = out_of_resources(err, kLayer, what)) return *limit;
  return Error{
      ExitCode::kBlocked, kLayer, what + ": " + std::strerror(err), {}};
}

Error bad_input(const std::string& message, const std::string& fix = {}) {
  return Error{ExitCode::kUsage, kLayer, message, fix};
}

// Hashes a byte stream as bundle.toml records it: the whole stream, and
// each kChunkBytes range separately (so verify can hash chunks in parallel
// and name the bad region). An empty file has no chunks.
class ChunkedHasher {
 public:
  void update(const char* data, std::size_t n) {
    whole_.update(data, n);
    while (n > 0) {
      const std::size_t take = static_cast<std::size_t>(
          std::min<std::uint64_t>(n, kChunkBytes - in_chunk_));
      chunk_.update(data, take);
      in_chunk_ += take;
      size_ += take;
      data += take;
      n -= take;
      if (in_chunk_ == kChunkBytes) finish_chunk();
    }
  }

  // Fills size, sha256 and chunks; false when OpenSSL failed.
  bool finish(FileEntry& entry) {
    if (in_chunk_ > 0) finish_chunk();
    if (!whole_.ok() || !chunks_ok_) return false;
    entry.size = size_;
    entry.sha256 = whole_.hex();
    entry.chunks = std::move(chunks_);
    return !entry.sha256.empty();
  }

 private:
  void finish_chunk() {
    std::string hex = chunk_.hex();  // and starts the next chunk
    chunks_ok_ = chunks_ok_ && !hex.empty();
    chunks_.push_back(std::move(hex));
    in_chunk_ = 0;
  }

  Sha256 whole_;
  Sha256 chunk_;
  bool chunks_ok_ = true;
  std::uint64_t in_chunk_ = 0;
  std::uint64_t size_ = 0;
  std::vector<std::string> chunks_;
};

// Creates `path` (which must not exist) with exactly `mode`, whatever the
// umask, so the bundle's modes do not depend on who made it.
Result<UniqueFd> create_file(const std::string& path, mode_t mode) {
  UniqueFd fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) return io_error("cannot create " + path, errno);
  if (::fchmod(fd.get(), mode) != 0) {
    const int err = errno;
    fd.reset();
    return io_error("cannot set the mode of " + path, err);
  }
  return fd;
}

Result<void> write_all(int fd, const char* data, std::size_t n,
                       const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write " + path, errno);
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return {};
}

// Writes a file from memory, fsyncs it, and returns its entry.
Result<FileEntry> write_text_file(const std::string& root,
                                  const std::string& rel,
                                  const std::string& text, mode_t mode) {
  const std::string path = root + "/" + rel;
  auto fd = create_file(path, mode);
  if (!fd) return fd.error();
  if (auto w = write_all(fd->get(), text.data(), text.size(), path); !w) {
    return w.error();
  }
  if (::fsync(fd->get()) != 0) return io_error("cannot fsync " + path, errno);
  FileEntry entry;
  entry.path = rel;
  ChunkedHasher hasher;
  hasher.update(text.data(), text.size());
  if (!hasher.finish(entry)) {
    return io_error("SHA-256 failed for " + path, EIO);
  }
  return entry;
}

// Copies `src` to root/rel byte for byte, streaming, hashing as it goes,
// so each input is read exactly once. `open_flags` adds to the source's
// open(2) flags (O_NOFOLLOW where a link must not be followed).
Result<FileEntry> copy_file(const std::string& src, const std::string& root,
                            const std::string& rel, mode_t mode,
                            ProgressPiece& progress, int open_flags = 0) {
  UniqueFd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC | open_flags));
  if (!in) return io_error("cannot read " + src, errno);
  // Tell the kernel the read is sequential: multi-GB archives stream better.
  ::posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  const std::string dst = root + "/" + rel;
  auto out = create_file(dst, mode);
  if (!out) return out.error();
  ChunkedHasher hasher;
  std::vector<char> buf(1 << 20);
  crash_point("bundle-create:copy");
  for (;;) {
    // `bundle create` has no --timeout; a Ctrl-C ends the copy here and
    // PartialDir removes the partial output.
    if (auto go = keep_going(kNoDeadline, "bundle", "copying " + src); !go)
      return go.error();
    const ssize_t r = ::read(in.get(), buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot read " + src, errno);
    }
    if (r == 0) break;
    hasher.update(buf.data(), static_cast<std::size_t>(r));
    progress.add(static_cast<std::uint64_t>(r));
    if (auto w =
            write_all(out->get(), buf.data(), static_cast<std::size_t>(r), dst);
        !w) {
      return w.error();
    }
  }
  if (::fsync(out->get()) != 0) return io_error("cannot fsync " + dst, errno);
  FileEntry entry;
  entry.path = rel;
  if (!hasher.finish(entry)) return io_error("SHA-256 failed for " + src, EIO);
  return entry;
}

Result<void> make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0) {
    return io_error("cannot create " + path, errno);
  }
  // Exactly 0755 whatever the umask.
  if (::chmod(path.c_str(), 0755) != 0) {
    return io_error("cannot set the mode of " + path, errno);
  }
  return {};
}

// A file of the portable tree's collection, checked before anything is
// written: a bundle never carries a link (verify refuses one), so a link in
// the tree is named here instead of being followed or copied.
Result<void> check_tree_file(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return io_error("cannot read " + path, errno);
  }
  if (S_ISLNK(st.st_mode)) {
    return bad_input(path + " is a symbolic link; a bundle carries no links",
                     "replace it with a copy of the file it points to");
  }
  if (!S_ISREG(st.st_mode)) {
    return bad_input(path +
                     " is not a regular file; a bundle carries only "
                     "regular files and directories");
  }
  return {};
}

Result<void> fsync_path(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return io_error("cannot open " + path, errno);
  if (::fsync(fd.get()) != 0) return io_error("cannot fsync " + path, errno);
  return {};
}

Result<void> set_mtime(const std::string& path, std::time_t t) {
  struct timespec times[2];
  times[0].tv_sec = t;
  times[0].tv_nsec = 0;
  times[1] = times[0];
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    return io_error("cannot set the time of " + path, errno);
  }
  return {};
}

// Removes the partial directory unless the bundle was completed.
class PartialDir {
 public:
  explicit PartialDir(std::string path) : path_(std::move(path)) {}
  ~PartialDir() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  PartialDir(const PartialDir&) = delete;
  PartialDir& operator=(const PartialDir&) = delete;
  const std::string& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  std::string path_;
};

// "YYYY-MM-DDTHH:MM:SSZ" -> seconds since the epoch (UTC).
bool parse_iso8601(const std::string& s, std::time_t& out) {
  std::tm tm{};
  char z = 0;
  int n = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%c%n", &tm.tm_year,
                  &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
                  &z, &n) != 7 ||
      z != 'Z' || static_cast<std::size_t>(n) != s.size()) {
    return false;
  }
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
      tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60 ||
      tm.tm_year < 1970) {
    return false;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  out = ::timegm(&tm);
  // Round trip: rejects dates like Feb 30 that timegm would normalise.
  return out >= 0 &&
         iso8601_utc(std::chrono::system_clock::from_time_t(out)) == s;
}

struct LearnedImage {
  const LockedImage* locked = nullptr;
  ImageArchiveInfo info;
};

// Which locked image an archive holds, learned by peeking with each locked
// ref (cheap: reads only the metadata of an uncompressed tar).
Result<LearnedImage> identify(const std::string& path) {
  std::string last_error;
  for (const LockedImage* locked :
       {&locked_device_plugin_image(), &locked_cuda_sample_image()}) {
    auto peek = peek_image_archive(path, locked->ref);
    if (peek) {
      // ctr imports the bundle's tars as they are and verify hashes the
      // file: a compressed archive would need a decompressing pipe there.
      if (peek->compressed) {
        return bad_input(
            path +
                " is compressed; a bundle holds plain tars that ctr "
                "imports directly: decompress it first",
            "gunzip / unzstd the archive and pass the .tar");
      }
      return LearnedImage{locked, std::move(*peek)};
    }
    // A wrong image is a usage error naming what it holds; anything else
    // (not a tar, damaged metadata) is final.
    if (peek.error().exit != ExitCode::kUsage ||
        peek.error().message.find("holds no image named") ==
            std::string::npos) {
      return peek.error();
    }
    last_error = peek.error().message;
  }
  return bad_input(path + " holds neither " + locked_device_plugin_image().ref +
                   " nor " + locked_cuda_sample_image().ref + " (" +
                   last_error + ")");
}

// Verifies the archive completely for each wanted platform it has; at least
// one of them must be present. Returns the platforms recorded.
Result<ImageArchiveInfo> verify_for_platforms(
    const std::string& path, const std::string& ref,
    const std::vector<std::string>& wanted) {
  std::optional<ImageArchiveInfo> first;
  std::vector<std::string> verified;
  std::string has;
  for (const auto& platform : wanted) {
    if (first) {
      // The first verification listed what the archive has; do not re-read
      // it for a platform it lacks.
      const auto& p = first->platforms;
      if (std::find(p.begin(), p.end(), platform) == p.end()) continue;
    }
    auto r = verify_image_archive(path, ref, platform);
    if (!r) {
      // Lacking this platform is fine as long as another wanted one is
      // there; every other failure (damage, malformed) refuses the archive.
      if (r.error().exit == ExitCode::kUsage &&
          r.error().message.find("has no image for") != std::string::npos) {
        has = r.error().message;
        continue;
      }
      return r.error();
    }
    if (!first) first = *r;
    verified.push_back(platform);
  }
  if (!first) {
    return bad_input(path + " has an image for none of the platforms " + [&] {
      std::string s;
      for (const auto& p : wanted) s += (s.empty() ? "" : ", ") + p;
      return s;
    }() + (has.empty() ? "" : " (" + has + ")"));
  }
  std::sort(verified.begin(), verified.end());
  first->platforms = verified;
  return *first;
}

}  // namespace

std::string image_file_name(const std::string& ref) {
  // Last path component with its tag (and a short digest when pinned by
  // digest): nvcr.io/nvidia/k8s-device-plugin:v0.19.3 ->
  // k8s-device-plugin-v0.19.3.tar.
  std::string r = ref;
  std::string digest;
  if (auto at = r.find('@'); at != std::string::npos) {
    digest = r.substr(at + 1);
    r = r.substr(0, at);
    if (auto colon = digest.find(':'); colon != std::string::npos) {
      digest = digest.substr(colon + 1, 12);
    }
  }
  std::string last =
      r.substr(r.rfind('/') == std::string::npos ? 0 : r.rfind('/') + 1);
  std::string name;
  for (char c : last + (digest.empty() ? "" : "-" + digest)) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                      c == '-';
    name += safe ? c : '-';
  }
  // Never a hidden or empty name.
  while (!name.empty() && name.front() == '.') name.erase(0, 1);
  if (name.empty()) name = "image";
  return name + ".tar";
}

Result<std::string> resolve_created(const std::string& created) {
  if (!created.empty()) {
    std::time_t t = 0;
    if (!parse_iso8601(created, t)) {
      return bad_input("--created " + created + " is not an ISO 8601 UTC time",
                       "use the form 2026-01-31T12:00:00Z");
    }
    return created;
  }
  if (const char* sde = std::getenv("SOURCE_DATE_EPOCH"); sde && *sde) {
    char* end = nullptr;
    errno = 0;
    const long long secs = std::strtoll(sde, &end, 10);
    if (errno != 0 || *end != '\0' || secs < 0) {
      return bad_input(std::string("SOURCE_DATE_EPOCH=") + sde +
                       " is not a number of seconds");
    }
    return iso8601_utc(
        std::chrono::system_clock::from_time_t(static_cast<std::time_t>(secs)));
  }
  return iso8601_utc(std::chrono::system_clock::now());
}

Result<CreateReport> create_bundle(const CreateOptions& options) {
  // --- Check everything that needs no writing first. ---
  std::string out = options.out;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  if (out.empty()) return bad_input("bundle create needs --out PATH");
  {
    std::error_code ec;
    const auto st = fs::symlink_status(out, ec);
    if (!ec && fs::exists(st)) {
      if (!fs::is_directory(st) || !fs::is_empty(out, ec) || ec) {
        return bad_input(out + " already exists and is not an empty directory",
                         "choose a new --out path or empty it");
      }
    }
  }
  auto created = resolve_created(options.created);
  if (!created) return created.error();
  std::time_t created_t = 0;
  parse_iso8601(*created, created_t);
  if (options.image_archives.empty() && options.pulls.empty()) {
    return bad_input(
        "bundle create needs at least one --image-archive or --pull");
  }
  if (options.platforms.empty()) {
    return bad_input("bundle create needs at least one platform");
  }
  if (options.self_binary.empty()) {
    return bad_input("bundle create: the gpunode binary to copy is not known");
  }
  for (const auto& rel : options.collection_files) {
    if (auto r = check_tree_file(options.collections_root + "/" + rel); !r) {
      return r.error();
    }
  }

  // Verify every archive before writing anything: a refused input leaves
  // no trace.
  Manifest m;
  m.created = *created;
  m.gpunode_version = GPUNODE_VERSION;
  m.min_driver = options.min_driver;
  std::vector<std::pair<std::string, ImageEntry>> to_copy;  // source, entry
  std::set<std::string> seen_names;
  for (const auto& path : options.image_archives) {
    auto learned = identify(path);
    if (!learned) return learned.error();
    const LockedImage& locked = *learned->locked;
    if (!seen_names.insert(locked.name).second) {
      return bad_input("more than one --image-archive holds " + locked.ref +
                       " (" + path + ")");
    }
    auto info = verify_for_platforms(path, locked.ref, options.platforms);
    if (!info) return info.error();
    ImageEntry image;
    image.name = locked.name;
    image.ref = locked.ref;
    image.digest = info->target_digest;
    image.platforms = info->platforms;
    image.file = "images/" + image_file_name(locked.ref);
    to_copy.emplace_back(path, std::move(image));
  }
  // Pulls are checked now and fetched into the layout below: the pull
  // checks every digest and size while streaming, so the tar is neither
  // re-verified nor copied (one pass over the bytes).
  std::vector<std::pair<PullOptions, ImageEntry>> to_pull;
  for (const auto& pull : options.pulls) {
    auto parsed = parse_image_ref(pull.ref);
    if (!parsed) return parsed.error();
    const std::string name_as = pull.name_as.empty() ? pull.ref : pull.name_as;
    const LockedImage* locked = nullptr;
    for (const LockedImage* l :
         {&locked_device_plugin_image(), &locked_cuda_sample_image()}) {
      if (l->ref == name_as) locked = l;
    }
    if (locked == nullptr) {
      return bad_input("--pull " + pull.ref + " is neither " +
                           locked_device_plugin_image().ref + " nor " +
                           locked_cuda_sample_image().ref +
                           " (or a mirror's copy of one)",
                       "a bundle carries the images in images/images.lock");
    }
    if (!seen_names.insert(locked->name).second) {
      return bad_input("more than one --image-archive or --pull holds " +
                       locked->ref + " (" + pull.ref + ")");
    }
    ImageEntry image;
    image.name = locked->name;
    image.ref = locked->ref;
    image.file = "images/" + image_file_name(locked->ref);
    to_pull.emplace_back(pull, std::move(image));
  }

  // The toolkit packages: each directory's set is read and checked now.
  auto package_sets =
      read_toolkit_package_dirs(options.toolkit_package_dirs, options.note);
  if (!package_sets) return package_sets.error();

  // --- Lay the bundle out in a temporary sibling. ---
  std::string tmpl = out + ".partial-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return bad_input("the directory that would hold " + out +
                       " does not exist");
    }
    return io_error("cannot create a directory next to " + out, err);
  }
  PartialDir partial(buf.data());
  const std::string& root = partial.path();
  if (::chmod(root.c_str(), 0755) != 0) {
    return io_error("cannot set the mode of " + root, errno);
  }
  // Every directory made below root, parents first; their times are fixed
  // once everything is written.
  std::vector<std::string> dirs;
  auto make_parents = [&](const std::string& rel) -> Result<void> {
    for (std::size_t slash = rel.find('/'); slash != std::string::npos;
         slash = rel.find('/', slash + 1)) {
      const std::string d = rel.substr(0, slash);
      if (std::find(dirs.begin(), dirs.end(), d) != dirs.end()) continue;
      if (auto r = make_dir(root + "/" + d); !r) return r;
      dirs.push_back(d);
    }
    return {};
  };
  for (const char* d : {"bin/", "images/", "manifests/"}) {
    if (auto r = make_parents(d); !r) return r.error();
  }

  auto add = [&](Result<FileEntry> entry) -> Result<void> {
    if (!entry) return entry.error();
    m.files.push_back(std::move(*entry));
    return {};
  };
  // The copies' total, known before the first byte: their sources' sizes.
  std::uint64_t to_copy_bytes = 0;
  auto count = [&](const std::string& src) {
    std::error_code ec;
    const auto size = fs::file_size(src, ec);
    if (!ec) to_copy_bytes += size;
  };
  count(options.self_binary);
  for (const auto& src : options.runtime_files) count(src);
  for (const auto& file : options.collection_files)
    count(options.collections_root + "/" + file);
  for (const auto& copy : to_copy) count(copy.first);
  for (const ToolkitPackageSet& set : *package_sets)
    for (const ToolkitPackageFile& file : set.files) count(file.path);
  ProgressPiece copying(*options.progress, "create", options.out,
                        to_copy_bytes);
  if (auto r = add(
          copy_file(options.self_binary, root, "bin/gpunode", 0755, copying));
      !r) {
    return r.error();
  }
  for (const auto& src : options.runtime_files) {
    const mode_t mode = ::access(src.c_str(), X_OK) == 0 ? 0755 : 0644;
    const std::string rel = "lib/gpunode/" + fs::path(src).filename().string();
    if (auto r = make_parents(rel); !r) return r.error();
    if (auto r = add(copy_file(src, root, rel, mode, copying)); !r)
      return r.error();
  }
  for (const auto& file : options.collection_files) {
    const std::string src = options.collections_root + "/" + file;
    const mode_t mode = ::access(src.c_str(), X_OK) == 0 ? 0755 : 0644;
    const std::string rel = std::string(kCollectionsDir) + "/" + file;
    if (auto r = make_parents(rel); !r) return r.error();
    // O_NOFOLLOW: a link swapped in since the check is refused, not copied.
    if (auto r = add(copy_file(src, root, rel, mode, copying, O_NOFOLLOW));
        !r) {
      return r.error();
    }
  }
  for (auto& [source, image] : to_copy) {
    if (auto r = add(copy_file(source, root, image.file, 0644, copying)); !r) {
      return r.error();
    }
    m.images.push_back(image);
  }
  for (const ToolkitPackageSet& set : *package_sets) {
    for (const ToolkitPackageFile& file : set.files) {
      const std::string rel = package_bundle_file(file.info);
      if (auto r = make_parents(rel); !r) return r.error();
      auto entry = copy_file(file.path, root, rel, 0644, copying, O_NOFOLLOW);
      if (!entry) return entry.error();
      if (auto same = confirm_copied_package(root + "/" + rel, file); !same)
        return same.error();
      m.packages.push_back({file.info.family, file.info.name, file.info.version,
                            file.info.arch, rel, entry->sha256});
      m.files.push_back(std::move(*entry));
    }
  }
  copying.done();
  for (auto& [pull, image] : to_pull) {
    pull.out_path = root + "/" + image.file;
    pull.platforms = options.platforms;
    if (pull.progress == &no_progress()) pull.progress = options.progress;
    ChunkedHasher hasher;
    pull.on_output = [&hasher](const char* p, std::size_t n) {
      hasher.update(p, n);
    };
    if (options.note) options.note("pulling " + pull.ref);
    auto pulled = pull_to_oci_archive(pull);
    if (!pulled) return pulled.error();
    FileEntry entry;
    entry.path = image.file;
    if (!hasher.finish(entry)) {
      return io_error("SHA-256 failed for " + pull.out_path, EIO);
    }
    if (options.note) {
      options.note("pulled " + pull.ref + " (" + pulled->digest + ", " +
                   std::to_string(pulled->blob_bytes) + " bytes of blobs)");
    }
    image.digest = pulled->digest;
    image.platforms = pulled->platforms;
    std::sort(image.platforms.begin(), image.platforms.end());
    m.files.push_back(std::move(entry));
    m.images.push_back(image);
  }
  const std::pair<const char*, const char*> manifests[] = {
      {"manifests/runtimeclass-nvidia.yml", kRuntimeClassManifest},
      {"manifests/nvidia-device-plugin.yml", kDevicePluginManifest},
      {"manifests/nvidia-device-plugin-timeSlicing.yml", kTimeSlicingManifest},
  };
  for (const auto& [rel, text] : manifests) {
    if (auto r = add(write_text_file(root, rel, text, 0644)); !r) {
      return r.error();
    }
  }
  if (auto r = add(write_text_file(root, "install.sh", kInstallSh, 0755)); !r) {
    return r.error();
  }
  std::sort(
      m.files.begin(), m.files.end(),
      [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  std::sort(
      m.images.begin(), m.images.end(),
      [](const ImageEntry& a, const ImageEntry& b) { return a.name < b.name; });

  const std::string toml = write_manifest(m);
  if (auto r = write_text_file(root, "bundle.toml", toml, 0644); !r) {
    return r.error();
  }
  bool is_signed = false;
  if (options.sign_key_pem) {
    auto sig = sign(*options.sign_key_pem, toml);
    if (!sig) return sig.error();
    if (auto r = write_text_file(root, "bundle.toml.sig", *sig, 0644); !r) {
      return r.error();
    }
    is_signed = true;
  }

  // Fixed times on everything (files first, then directories, whose mtime
  // the file writes changed), so archives of the bundle are reproducible.
  std::vector<std::string> files = {"bundle.toml"};
  if (is_signed) files.push_back("bundle.toml.sig");
  for (const auto& f : m.files) files.push_back(f.path);
  for (const auto& f : files) {
    if (auto r = set_mtime(root + "/" + f, created_t); !r) return r.error();
  }
  // Children before parents, the bundle's root last.
  dirs.insert(dirs.begin(), "");
  for (auto d = dirs.rbegin(); d != dirs.rend(); ++d) {
    const std::string path = d->empty() ? root : root + "/" + *d;
    if (auto r = fsync_path(path); !r) return r.error();
    if (auto r = set_mtime(path, created_t); !r) return r.error();
  }

  // rename(2) replaces an empty directory atomically; anything else there
  // now (created since the check) makes it fail, and nothing is clobbered.
  if (::rename(root.c_str(), out.c_str()) != 0) {
    const int err = errno;
    if (err == ENOTEMPTY || err == EEXIST || err == ENOTDIR) {
      return bad_input(out + " already exists and is not an empty directory",
                       "choose a new --out path or empty it");
    }
    return io_error("cannot rename " + root + " to " + out, err);
  }
  partial.release();
  // The rename may touch the moved directory's times on some file systems.
  (void)set_mtime(out, created_t);
  const std::string parent = fs::path(out).parent_path().string();
  (void)fsync_path(parent.empty() ? "." : parent);

  CreateReport report;
  report.manifest = std::move(m);
  report.out = out;
  report.signed_ = is_signed;
  for (const auto& set : *package_sets)
    report.ignored.emplace_back(set.dir, set.ignored);
  return report;
}

}  // namespace gpunode::bundle
