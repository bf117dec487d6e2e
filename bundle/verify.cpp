// verify_bundle: the bundle comes on removable media that anyone may have
// handled, so it is treated as hostile input. Signature first (nothing else
// is trusted before it), then one walk of the tree that never follows a link
// and notes the inode of each listed file, then every byte read once, chunks
// spread over threads, each file opened again by name without following a
// link and checked to be that inode (what we hash is what we inspected).
// Each thread holds at most one file open, so a bundle of any number of
// files verifies under a small `ulimit -n` (issue 11, item 6).
// Nothing is ever written under the bundle directory.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "gpunode/bundle.hpp"
#include "gpunode/bundle_records.hpp"
#include "gpunode/crash_point.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/progress_piece.hpp"
#include "gpunode/unique_fd.hpp"
#include "gpunode/work_limits.hpp"

namespace gpunode::bundle {

namespace {

constexpr const char* kManifestName = "bundle.toml";
constexpr const char* kSignatureName = "bundle.toml.sig";
constexpr std::size_t kMaxSignatureBytes = 4096;  // Ed25519: 64 bytes
constexpr std::size_t kEd25519SignatureBytes = 64;
// Per pread, per thread. Small on purpose: the kernel copies each block
// from the page cache into this buffer and SHA-256 reads it straight back,
// so it must stay in the core's cache. Measured on the 2-core build
// machine over a 1 GB bundle: 4 MiB blocks cost 0.45-0.55 s of system time
// per GB (the copy missing the cache), 64 KiB blocks 0.06-0.12 s, for the
// same 0.65 s of hashing.
constexpr std::size_t kReadBlock = 64u << 10;
constexpr int kMaxDepth = 64;
constexpr const char* kFix =
    "get a fresh copy of the bundle from its publisher; do not install from "
    "this one";

Error integrity(std::string message) {
  return Error{ExitCode::kIntegrity, "bundle", std::move(message), kFix};
}

std::string errno_text(int e) { return std::strerror(e); }

// Reads a small top-level file (bundle.toml, its signature) without
// following a link, refusing anything bigger than `cap`. nullopt: absent.
Result<std::optional<std::string>> read_small(int dirfd, const char* name,
                                              std::size_t cap) {
  // O_NONBLOCK: a FIFO in its place would otherwise block the open forever;
  // the fstat below refuses it.
  UniqueFd fd(
      ::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) {
    const int e = errno;
    if (e == ENOENT) return std::optional<std::string>();
    if (auto limit =
            out_of_resources(e, "bundle", std::string(name) + ": cannot open"))
      return *limit;
    if (e == ELOOP)
      return integrity(std::string(name) +
                       ": is a symbolic link; bundles may not contain links");
    return integrity(std::string(name) + ": cannot open: " + errno_text(e));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return integrity(std::string(name) + ": cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode))
    return integrity(std::string(name) + ": is not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > cap)
    return integrity(std::string(name) + ": is " + std::to_string(st.st_size) +
                     " bytes; at most " + std::to_string(cap) +
                     " are accepted");
  std::string data(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::pread(fd.get(), data.data() + got, data.size() - got,
                              static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return integrity(std::string(name) +
                       ": read failed: " + errno_text(errno));
    if (n == 0) break;  // shrank while reading: the hash check will say so
    got += static_cast<std::size_t>(n);
  }
  data.resize(got);
  return std::optional<std::string>(std::move(data));
}

// Where the walk found a listed file: the inode it inspected. The hashing
// opens the file again by name and insists on the same inode, so what is
// hashed is what was inspected, without holding a descriptor per file.
struct Found {
  bool present = false;
  dev_t dev = 0;
  ino_t ino = 0;
};

struct Walk {
  const std::vector<FileEntry>& files;  // sorted by path (parse_manifest)
  std::vector<Found>& found;            // by files index
  std::vector<std::string>& problems;
  SteadyTime deadline;
  std::set<std::string> reported;  // paths already named in a problem
  // Set when the walk cannot go on (out of descriptors, deadline, signal):
  // the verification ends with it instead of a list of problems.
  std::optional<Error> fatal;

  void problem(const std::string& path, const std::string& what) {
    reported.insert(path);
    problems.push_back(path + ": " + what);
  }

  // A failed call with errno `e` on `path`: the machine's limit (fatal) or a
  // problem with the bundle.
  void failed(const std::string& path, const std::string& what, int e) {
    if (auto limit = out_of_resources(e, "bundle", path + ": cannot " + what)) {
      if (!fatal) fatal = std::move(*limit);
      return;
    }
    problem(path, "cannot " + what + ": " + errno_text(e));
  }

  void dir(int dirfd, const std::string& prefix, int depth) {
    const std::string here = prefix.empty() ? "." : prefix;
    if (depth > kMaxDepth) {
      problem(here,
              "directories nest deeper than " + std::to_string(kMaxDepth));
      return;
    }
    // fdopendir owns the descriptor it is given; hand it a duplicate so
    // the caller's stays valid for openat/fstatat.
    const int dup = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (dup < 0) return failed(here, "read directory", errno);
    DirPtr d(::fdopendir(dup));
    if (!d) {
      const int e = errno;
      ::close(dup);
      return failed(here, "read directory", e);
    }
    // Sorted, so that the problems come out in a stable order.
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d.get())) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    // One descriptor per level of nesting while the walk goes deeper.
    d.reset();
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      if (fatal) return;
      if (auto go = keep_going(deadline, "bundle", "walking the bundle"); !go) {
        fatal = go.error();
        return;
      }
      entry(dirfd, prefix, name, depth);
    }
  }

  void entry(int dirfd, const std::string& prefix, const std::string& name,
             int depth) {
    const std::string rel = prefix.empty() ? name : prefix + "/" + name;
    if (prefix.empty() && (name == kManifestName || name == kSignatureName))
      return;  // read (without following links) before the walk
    struct stat st {};
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return failed(rel, "stat", errno);
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      const ssize_t n =
          ::readlinkat(dirfd, name.c_str(), target, sizeof target - 1);
      const std::string to = n >= 0 ? std::string(target, n) : "?";
      problem(rel, "is a symbolic link (to " + to +
                       "); bundles may not contain links");
      return;
    }
    if (S_ISDIR(st.st_mode)) {
      UniqueFd sub(::openat(dirfd, name.c_str(),
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub) return failed(rel, "open directory", errno);
      dir(sub.get(), rel, depth + 1);
      return;
    }
    if (!S_ISREG(st.st_mode)) {
      const char* kind = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                         : S_ISFIFO(st.st_mode)                     ? "a FIFO"
                         : S_ISSOCK(st.st_mode)                     ? "a socket"
                                                : "not a regular file";
      problem(rel, std::string("is ") + kind +
                       "; bundles hold only regular files and directories");
      return;
    }
    // A binary search of the sorted list: an index of every path would
    // cost another copy of them all (issue 24: memory at 70,000 files).
    auto it = std::lower_bound(
        files.begin(), files.end(), rel,
        [](const FileEntry& f, const std::string& p) { return f.path < p; });
    if (it == files.end() || it->path != rel) {
      problem(rel, "is not listed in bundle.toml");
      return;
    }
    const FileEntry& f = *it;
    const std::size_t index = static_cast<std::size_t>(it - files.begin());
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size != f.size) {
      problem(rel, "is " + std::to_string(size) + " bytes; bundle.toml says " +
                       std::to_string(f.size) +
                       (size < f.size ? " (truncated)" : ""));
      return;
    }
    found[index] = Found{true, st.st_dev, st.st_ino};
  }
};

// Opens the regular file at `rel` (as the walk listed it) below `root`,
// one component at a time, never following a link, and checks it is still
// the inode the walk inspected, with the size bundle.toml gives.
// Errors: the message for the bundle's problem list, or `fatal` set when
// the machine's limit was hit.
Result<UniqueFd> open_listed(int root, const FileEntry& f, const Found& where) {
  auto fail = [&](const std::string& what, int e) -> Error {
    if (auto limit = out_of_resources(e, "bundle", f.path + ": cannot open"))
      return *limit;
    return integrity(what + ": " + errno_text(e));
  };
  UniqueFd dir;
  int at = root;
  std::size_t start = 0;
  for (std::size_t slash;
       (slash = f.path.find('/', start)) != std::string::npos;
       start = slash + 1) {
    const std::string part = f.path.substr(start, slash - start);
    UniqueFd next(::openat(at, part.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return fail("cannot open its directory", errno);
    dir = std::move(next);
    at = dir.get();
  }
  // O_NONBLOCK: a FIFO swapped in since the walk must not block the open.
  UniqueFd fd(::openat(at, f.path.c_str() + start,
                       O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return fail("cannot open", errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail("cannot stat", errno);
  if (!S_ISREG(st.st_mode) || st.st_dev != where.dev || st.st_ino != where.ino)
    return integrity("was replaced while being verified");
  if (static_cast<std::uint64_t>(st.st_size) != f.size)
    return integrity("changed while being verified (now " +
                     std::to_string(st.st_size) + " bytes; bundle.toml says " +
                     std::to_string(f.size) + ")");
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  return fd;
}

// One unit of hashing work: one chunk of a file, or (chunk == kWholeFile)
// a multi-chunk file from its first byte to its last, for the whole-file
// sha256 that bundle.toml also records. SHA-256 cannot be resumed from
// another chunk's digest, so that digest is one sequential pass; it runs
// on one thread while the other threads hash the same file's chunks, all
// reading the same pages at about the same time (the page cache serves the
// second reader; the stick is read once).
constexpr std::size_t kWholeFile = static_cast<std::size_t>(-1);

struct Item {
  std::size_t file;
  std::size_t chunk;
  std::uint64_t offset;
  std::uint64_t length;
};

// Progress in the bundle's bytes while the work is more than that: a
// multi-chunk file is read twice (its chunks, and its whole-file pass). Each
// byte hashed moves the bar by total_bytes / total_work, so it shows the
// bundle's size and ends when the work does.
class ScaledProgress {
 public:
  ScaledProgress(ProgressPiece& piece, std::uint64_t total_bytes,
                 std::uint64_t total_work)
      : piece_(piece), total_bytes_(total_bytes), total_work_(total_work) {}

  void add(std::uint64_t work) {
    const std::uint64_t done = work_.fetch_add(work) + work;
    const std::uint64_t target =
        total_work_ == 0
            ? total_bytes_
            : static_cast<std::uint64_t>(static_cast<unsigned __int128>(done) *
                                         total_bytes_ / total_work_);
    std::uint64_t shown = shown_.load();
    while (target > shown && !shown_.compare_exchange_weak(shown, target)) {
    }
    if (target > shown) piece_.add(target - shown);
  }

 private:
  ProgressPiece& piece_;
  const std::uint64_t total_bytes_;
  const std::uint64_t total_work_;
  std::atomic<std::uint64_t> work_{0};
  std::atomic<std::uint64_t> shown_{0};
};

// Hashes [offset, offset+length) of fd into `digest` (hex), through `buf`.
// Returns "" or what went wrong. `go_on` is asked every 4 MiB (a chunk is
// 64 MiB: seconds on a slow stick) whether to carry on.
std::string hash_range(int fd, std::uint64_t offset, std::uint64_t length,
                       Sha256& sha, std::vector<char>& buf,
                       std::atomic<std::uint64_t>& bytes,
                       ScaledProgress& progress,
                       const std::function<bool()>& go_on,
                       std::string& digest) {
  if (!sha.reset()) return "cannot start SHA-256";
  constexpr std::uint64_t kAskEvery = 4u << 20;
  std::uint64_t done = 0;
  std::uint64_t asked_at = 0;
  while (done < length) {
    if (done - asked_at >= kAskEvery) {
      asked_at = done;
      if (!go_on()) return "stopped";
    }
    const std::size_t want = static_cast<std::size_t>(
        std::min<std::uint64_t>(buf.size(), length - done));
    const ssize_t n =
        ::pread(fd, buf.data(), want, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return "read failed at byte " + std::to_string(offset + done) + ": " +
             errno_text(errno);
    if (n == 0)
      return "ends at byte " + std::to_string(offset + done) +
             " (changed while being verified)";
    sha.update(buf.data(), static_cast<std::size_t>(n));
    done += static_cast<std::uint64_t>(n);
    bytes.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    progress.add(static_cast<std::uint64_t>(n));
  }
  digest = sha.hex();
  return "";
}

std::string fingerprints(const std::vector<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) {
    if (!out.empty()) out += ", ";
    const std::string fp = key_fingerprint(k);
    out += fp.empty() ? "<unreadable key>" : fp;
  }
  return out;
}

}  // namespace

Result<VerifyReport> verify_bundle(const std::string& dir,
                                   const VerifyOptions& options) {
  // The bundle root itself may be reached through a link (a mount point
  // alias); nothing below it may.
  UniqueFd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    if (auto limit = out_of_resources(errno, "bundle", dir + ": cannot open"))
      return *limit;
    return Error{
        ExitCode::kUsage,
        "bundle",
        dir + ": cannot open the bundle directory: " + errno_text(errno),
        {}};
  }

  auto text = read_small(root.get(), kManifestName, kMaxManifestBytes);
  if (!text) return text.error();
  if (!*text)
    return integrity(dir +
                     ": has no bundle.toml; this is not a gpunode bundle");

  VerifyReport report;
  if (!options.insecure_skip_signature && !options.trust_keys.empty()) {
    auto sig = read_small(root.get(), kSignatureName, kMaxSignatureBytes);
    if (!sig) return sig.error();
    if (!*sig)
      return integrity(
          "bundle is not signed (no bundle.toml.sig), but a trusted key is "
          "configured");
    // Said plainly: a cut-off signature is damage to the stick, not a
    // bundle from someone else (both fail verification alike).
    if ((*sig)->size() != kEd25519SignatureBytes)
      return integrity(std::string(kSignatureName) + ": is " +
                       std::to_string((*sig)->size()) +
                       " bytes; an Ed25519 signature is " +
                       std::to_string(kEd25519SignatureBytes) +
                       " (truncated, or not a gpunode signature)");
    for (const std::string& key : options.trust_keys) {
      auto ok = signature_valid(key, **text, **sig);
      if (!ok) return ok.error();
      if (*ok) {
        report.signed_by_trusted_key = true;
        report.key_fingerprint = key_fingerprint(key);
        break;
      }
    }
    if (!report.signed_by_trusted_key) {
      // Often the wrong .pub, not a forged stick: say both.
      Error e = integrity(
          "bundle.toml: signature does not match any trusted key "
          "(fingerprints: " +
          fingerprints(options.trust_keys) + ")");
      e.fix =
          "check that the trusted key (--trust-key, or the trusted keys "
          "directory) is the bundle publisher's public key; if it is, get a "
          "fresh copy of the bundle from its publisher";
      return e;
    }
  }

  auto manifest = parse_manifest(**text, dir + "/" + kManifestName);
  if (!manifest) return manifest.error();
  report.manifest = std::move(*manifest);
  text->reset();  // up to kMaxManifestBytes, not needed from here on
  const std::vector<FileEntry>& files = report.manifest.files;

  std::vector<Found> found(files.size());
  std::vector<std::string> problems;
  Walk walk{files, found, problems, options.deadline, {}, {}};
  walk.dir(root.get(), "", 0);
  if (walk.fatal) return *walk.fatal;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!found[i].present && !walk.reported.count(files[i].path))
      problems.push_back(files[i].path + ": is missing");
  }

  // Every file is listed and inspected (none is held open): a stick pulled
  // from here on shows up as failed opens or short reads, which the hashing
  // names.
  crash_point("bundle-verify:opened");

  // One work item per chunk of every file that is there with the right size,
  // after one whole-file item per multi-chunk file, longest first: those are
  // the long sequential passes, so they start first and the chunks fill the
  // other threads around them. Memory is bounded by bundle.toml's size
  // (kMaxManifestBytes): a few words per chunk it lists, and one read buffer
  // per thread.
  const std::uint64_t chunk = report.manifest.chunk_bytes;
  std::vector<Item> items;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (found[i].present && files[i].chunks.size() > 1)
      items.push_back({i, kWholeFile, 0, files[i].size});
  }
  std::stable_sort(
      items.begin(), items.end(),
      [](const Item& a, const Item& b) { return a.length > b.length; });
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (!found[i].present) continue;
    for (std::size_t c = 0; c < files[i].chunks.size(); ++c) {
      const std::uint64_t off = c * chunk;
      items.push_back({i, c, off, std::min(chunk, files[i].size - off)});
    }
  }
  // Progress shows the bundle's bytes, moved by the hashing to do (a
  // multi-chunk file's bytes twice), so the bar ends when the work does.
  // bytes_hashed counts each listed byte once.
  std::uint64_t to_hash = 0;
  std::uint64_t listed = 0;
  for (const Item& it : items) {
    to_hash += it.length;
    if (it.chunk != kWholeFile) listed += it.length;
  }
  ProgressPiece progress_piece(*options.progress, "verify", dir, listed);
  ScaledProgress progress(progress_piece, listed, to_hash);
  // What went wrong with each item ("" for none), in item order.
  std::vector<std::string> item_problems(items.size());
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> whole_file_bytes{0};  // read twice; counted once
  std::atomic<bool> stop{false};
  std::mutex fatal_mutex;
  std::optional<Error> fatal;
  auto give_up = [&](Error e) {
    std::lock_guard<std::mutex> lock(fatal_mutex);
    if (!fatal) fatal = std::move(e);
    stop = true;
  };
  const std::string doing = "verifying the bundle " + dir;
  auto worker = [&] {
    Sha256 sha;
    std::vector<char> buf(
        static_cast<std::size_t>(std::min<std::uint64_t>(kReadBlock, chunk)));
    // At most one file open per thread: consecutive items of one file
    // share it.
    UniqueFd fd;
    std::size_t fd_file = files.size();
    // Between items and inside long ones: the deadline, a Ctrl-C, or
    // another thread that gave up.
    const std::function<bool()> go_on = [&] {
      if (stop) return false;
      if (auto go = keep_going(options.deadline, "bundle", doing); !go) {
        give_up(go.error());
        return false;
      }
      return true;
    };
    for (std::size_t k; (k = next.fetch_add(1)) < items.size();) {
      if (!go_on()) return;
      const Item& it = items[k];
      const FileEntry& f = files[it.file];
      if (fd_file != it.file) {
        fd = UniqueFd();
        fd_file = it.file;
        auto opened = open_listed(root.get(), f, found[it.file]);
        if (!opened) {
          if (opened.error().exit == ExitCode::kCannotRun)
            return give_up(opened.error());
          item_problems[k] = opened.error().message;
          continue;
        }
        fd = std::move(*opened);
      }
      if (!fd) continue;  // its open failed for an earlier chunk
      std::string digest;
      const bool whole = it.chunk == kWholeFile;
      std::string error =
          hash_range(fd.get(), it.offset, it.length, sha, buf,
                     whole ? whole_file_bytes : bytes, progress, go_on, digest);
      if (!error.empty()) {
        item_problems[k] = std::move(error);
      } else if (whole) {
        if (digest != f.sha256)
          item_problems[k] =
              "sha256 of the whole file does not match bundle.toml's (" +
              std::to_string(f.chunks.size()) + " chunks read)";
      } else if (digest != f.chunks[it.chunk]) {
        item_problems[k] = "bytes " + std::to_string(it.offset) + "-" +
                           std::to_string(it.offset + it.length - 1) +
                           " do not match (chunk " +
                           std::to_string(it.chunk + 1) + " of " +
                           std::to_string(f.chunks.size()) + ")";
      } else if (f.chunks.size() == 1 && digest != f.sha256) {
        // One chunk is the whole file: its digest is the file's too, so
        // bundle.toml contradicts itself.
        item_problems[k] =
            "sha256 does not match the file (its one chunk does: "
            "bundle.toml is inconsistent)";
      }
    }
  };
  unsigned threads =
      options.threads ? options.threads : std::thread::hardware_concurrency();
  threads = static_cast<unsigned>(
      std::max<std::size_t>(1, std::min<std::size_t>(threads, items.size())));
  if (threads == 1 || items.size() <= 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
  }
  report.bytes_hashed = bytes.load();
  if (fatal) return *fatal;

  // In file order, a file's chunks before its whole-file digest (kWholeFile
  // sorts last); one line per file for a file that could not be opened
  // (every item of it says the same), one per bad chunk otherwise.
  std::vector<std::size_t> bad_items;
  for (std::size_t k = 0; k < items.size(); ++k)
    if (!item_problems[k].empty()) bad_items.push_back(k);
  std::sort(bad_items.begin(), bad_items.end(),
            [&](std::size_t a, std::size_t b) {
              return std::tie(items[a].file, items[a].chunk) <
                     std::tie(items[b].file, items[b].chunk);
            });
  std::string last_line;
  for (std::size_t k : bad_items) {
    std::string line = files[items[k].file].path + ": " + item_problems[k];
    if (line == last_line) continue;
    problems.push_back(line);
    last_line = std::move(line);
  }
  // Empty files have no chunks; their whole-file digest is known.
  static const std::string kEmptySha = sha256_hex("");
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (found[i].present && files[i].size == 0 && files[i].sha256 != kEmptySha)
      problems.push_back(files[i].path +
                         ": sha256 does not match the (empty) file");
  }

  // Every byte is what bundle.toml says: now what it says about the images
  // and packages must be what they say about themselves (a publisher's
  // mistake, or a re-signed bundle.toml, would otherwise import an image
  // or install a package under another identity).
  if (problems.empty()) {
    auto records = check_recorded_facts(
        report.manifest, [&](const std::string& path) -> Result<UniqueFd> {
          const auto it =
              std::lower_bound(files.begin(), files.end(), path,
                               [](const FileEntry& f, const std::string& p) {
                                 return f.path < p;
                               });
          if (it == files.end() || it->path != path)
            return integrity(path + ": is not listed in [[files]]");
          return open_listed(
              root.get(), *it,
              found[static_cast<std::size_t>(it - files.begin())]);
        });
    if (!records) return records.error();
    problems = std::move(*records);
  }

  if (!problems.empty()) {
    std::string message;
    for (const std::string& p : problems) {
      if (!message.empty()) message += '\n';
      message += p;
    }
    Error error = integrity(std::move(message));
    error.problems = std::move(problems);
    return error;
  }
  progress_piece.done();
  return report;
}

}  // namespace gpunode::bundle
