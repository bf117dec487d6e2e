#include "containerd/ctr_client.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include "gpunode/progress_piece.hpp"
#include "gpunode/unique_fd.hpp"

namespace gpunode {
namespace {

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

std::string first_line(const std::string& text) {
  std::string t = text.substr(0, text.find('\n'));
  return t.empty() ? text : t;
}

// A failed `ctr images import`. A disk that fills during the import (the
// preflight estimate is only an estimate) is said as such; the image stage
// then removes whatever record the import left.
Error import_failed(const std::string& what, const ProcessResult& r) {
  if (r.err.find("no space left on device") != std::string::npos)
    return Error{ExitCode::kBlocked, "image",
                 what +
                     " failed: the disk under "
                     "/var/lib/rancher/k3s/agent/containerd is full (" +
                     first_line(r.err) + ")",
                 "free space there (e.g. sudo k3s crictl rmi --prune removes "
                 "unused images), then rerun gpunode install"};
  if (r.timed_out)
    return Error{ExitCode::kTimeout, "image",
                 what + " failed (" + describe_failure(r) + ")",
                 "rerun with a longer --timeout"};
  return Error{ExitCode::kBlocked, "image",
               what + " failed (" + describe_failure(r) + ")",
               "see the message above; free disk space under /var/lib/rancher "
               "if it is full"};
}

}  // namespace

bool ImageRecord::has_label(const std::string& key,
                            const std::string& value) const {
  for (const auto& l : labels) {
    if (l == key + "=" + value) return true;
  }
  return false;
}

Result<ProcessResult> CtrClient::ctr(std::vector<std::string> args,
                                     const std::string& what) {
  std::vector<std::string> argv{"k3s", "ctr", "-n", "k8s.io"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = proc_.run(argv, timeout_);
  if (r.not_found) {
    return Error{ExitCode::kBlocked, "image",
                 "cannot " + what + ": k3s is not on PATH",
                 "run gpunode on the k3s node itself, as root"};
  }
  // A cut listing or blob would be read as a whole one: refuse it.
  if (!r.succeeded() || r.out_cut) {
    return Error{r.timed_out ? ExitCode::kTimeout : ExitCode::kBlocked, "image",
                 "cannot " + what + ": k3s ctr " + args.front() + " " +
                     (args.size() > 1 ? args[1] : "") + " failed (" +
                     describe_failure(r) + ")",
                 "check that k3s is running (sudo systemctl status k3s) and "
                 "its containerd "
                 "answers: sudo k3s ctr version"};
  }
  return r;
}

std::vector<ImageRecord> CtrClient::parse_images_ls(const std::string& out) {
  // REF TYPE DIGEST SIZE(two words) PLATFORMS LABELS
  std::vector<ImageRecord> records;
  std::istringstream in(out);
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (header) {
      header = false;
      continue;
    }
    auto w = words(line);
    if (w.size() < 7) continue;
    ImageRecord r{w[0], w[1], w[2], {}};
    if (w.back() != "-") {
      std::istringstream labels(w.back());
      std::string l;
      while (std::getline(labels, l, ',')) r.labels.push_back(l);
    }
    records.push_back(std::move(r));
  }
  return records;
}

std::optional<ImageCompleteness> CtrClient::parse_images_check(
    const std::string& out, const std::string& ref) {
  // REF TYPE DIGEST STATUS SIZE UNPACKED, STATUS like "complete (2/2)".
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    auto w = words(line);
    if (w.size() < 5 || w[0] != ref) continue;
    ImageCompleteness c;
    for (std::size_t i = 3; i < w.size(); ++i) {
      if (w[i] == "complete" || w[i] == "incomplete" || w[i] == "missing" ||
          w[i] == "unavailable") {
        c.complete = w[i] == "complete";
        c.status =
            w[i] +
            (i + 1 < w.size() && w[i + 1].front() == '(' ? " " + w[i + 1] : "");
        break;
      }
    }
    c.unpacked = w.back() == "true";
    return c;
  }
  return std::nullopt;
}

Result<std::optional<ImageRecord>> CtrClient::find(const std::string& ref) {
  auto r =
      ctr({"images", "ls", "name==" + ref}, "list images in k3s's containerd");
  if (!r) return r.error();
  for (auto& rec : parse_images_ls(r->out)) {
    if (rec.ref == ref) return std::optional<ImageRecord>(std::move(rec));
  }
  return std::optional<ImageRecord>();
}

Result<ImageCompleteness> CtrClient::completeness(const std::string& ref) {
  auto r = ctr({"images", "check", "name==" + ref}, "check image " + ref);
  if (!r) return r.error();
  auto c = parse_images_check(r->out, ref);
  if (!c) return ImageCompleteness{};
  return *c;
}

Result<std::string> CtrClient::content(const std::string& digest) {
  auto r = ctr({"content", "get", digest}, "read blob " + digest);
  if (!r) return r.error();
  return r->out;
}

std::vector<std::string> CtrClient::import_args(const std::string& base_name) {
  // --base-name names tag-only OCI refs (otherwise "import-<date>:tag") and
  // keeps other images in the archive out. Only the node's platform is
  // unpacked (ctr's default).
  return {"k3s",    "ctr",    "-n",          "k8s.io",
          "images", "import", "--base-name", base_name};
}

Result<void> CtrClient::import_file(const std::string& path,
                                    const std::string& base_name) {
  const std::string what = "k3s ctr images import " + path;
  if (progress_ == &no_progress()) {
    // Nobody watching: ctr reads the file itself, no copy through us.
    auto argv = import_args(base_name);
    argv.push_back(path);
    ProcessResult r = proc_.run(argv, timeout_);
    if (!r.succeeded()) return import_failed(what, r);
    return {};
  }
  // Watched: the file goes through ctr's standard input ("-", which ctr
  // reads as it would the file: containerd cmd/ctr/commands/images/
  // import.go), so every byte ctr takes is counted as it takes it. One more
  // copy of the archive through a pipe; verify, not this, is the long read.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0)
    return Error{ExitCode::kBlocked, "image",
                 "cannot read " + path + ": " + std::strerror(errno),
                 "check that the archive is there and readable"};
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<char> buf(1 << 20);
  const ProcessRunner::InputSource read_file =
      [&]() -> Result<std::string_view> {
    for (;;) {
      const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
      if (n >= 0) return std::string_view(buf.data(), n);
      if (errno != EINTR)
        return Error{ExitCode::kBlocked, "image",
                     "cannot read " + path + ": " + std::strerror(errno),
                     "check the disk the archive is on"};
    }
  };
  return import_input(read_file, base_name,
                      static_cast<std::uint64_t>(st.st_size), what);
}

Result<void> CtrClient::import_stream(const ProcessRunner::InputSource& source,
                                      const std::string& base_name,
                                      std::uint64_t total_bytes) {
  return import_input(source, base_name, total_bytes,
                      "k3s ctr images import -");
}

Result<void> CtrClient::import_input(const ProcessRunner::InputSource& source,
                                     const std::string& base_name,
                                     std::uint64_t total_bytes,
                                     const std::string& what) {
  auto argv = import_args(base_name);
  argv.push_back("-");
  ProgressPiece progress(*progress_, "import", base_name, total_bytes);
  // A chunk is counted when ctr can take it: the runner asks for the next
  // one only then.
  const ProcessRunner::InputSource counted = [&]() -> Result<std::string_view> {
    auto chunk = source();
    if (chunk) progress.add(chunk->size());
    return chunk;
  };
  ProcessResult r = proc_.run_with_input(argv, timeout_, counted);
  if (r.input_error) return *r.input_error;
  if (!r.succeeded()) return import_failed(what, r);
  progress.done();
  return {};
}

Result<void> CtrClient::pin(const std::string& ref) {
  auto r = ctr({"images", "label", ref, std::string(kPinnedLabel) + "=pinned"},
               "pin " + ref);
  if (!r) return r.error();
  return {};
}

Result<void> CtrClient::tag(const std::string& source,
                            const std::string& target) {
  auto r = ctr({"images", "tag", source, target}, "name " + target);
  if (!r) return r.error();
  return {};
}

std::map<std::string, std::vector<std::string>> CtrClient::parse_content_ls(
    const std::string& out) {
  // DIGEST SIZE AGE LABELS; SIZE and AGE are several words ("2 minutes"),
  // the labels one ("k=v,k=v") or none.
  std::map<std::string, std::vector<std::string>> blobs;
  std::istringstream in(out);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    auto w = words(line);
    if (w.empty() || w[0].rfind("sha256:", 0) != 0) continue;
    auto& labels = blobs[w[0]];
    if (w.size() < 2 || w.back().find('=') == std::string::npos) continue;
    std::istringstream list(w.back());
    for (std::string l; std::getline(list, l, ',');) labels.push_back(l);
  }
  return blobs;
}

Result<std::map<std::string, std::vector<std::string>>>
CtrClient::content_labels() {
  auto r = ctr({"content", "ls"}, "list the content store");
  if (!r) return r.error();
  return parse_content_ls(r->out);
}

Result<void> CtrClient::label_content(const std::string& digest,
                                      const std::string& label) {
  auto r = ctr({"content", "label", digest, label}, "label blob " + digest);
  if (!r) return r.error();
  return {};
}

Result<void> CtrClient::remove(const std::string& ref) {
  auto r = ctr({"images", "rm", ref}, "remove " + ref);
  if (!r) return r.error();
  return {};
}

}  // namespace gpunode
