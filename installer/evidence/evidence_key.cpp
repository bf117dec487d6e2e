#include "evidence/evidence_key.hpp"

#include <cstdio>

#include "gpunode/bundle.hpp"
#include "gpunode/state_dir.hpp"
#include "gpunode/text.hpp"

namespace gpunode {

namespace {

constexpr std::size_t kMaxKeyFile = 16 * 1024;

Error key_error(const std::string& message, const std::string& fix,
                ExitCode exit = ExitCode::kCannotRun) {
  return Error{exit, "evidence", message, fix};
}

std::string octal(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode);
  return buf;
}

}  // namespace

std::string evidence_private_path(const std::string& state_dir) {
  return state_dir + "/evidence.key";
}

std::string evidence_public_path(const std::string& state_dir) {
  return state_dir + "/evidence.pub";
}

Result<std::string> read_evidence_private(const FileSystem& fs,
                                          const std::string& state_dir) {
  const std::string path = evidence_private_path(state_dir);
  const auto info = fs.stat(path);
  if (!info)
    return key_error("this node has no evidence key (" + path + ")",
                     "gpunode install (the labels stage makes it and "
                     "publishes its public half on the Node)",
                     ExitCode::kBlocked);
  if (fs.is_symlink(path) || info->type != FileInfo::Type::kRegular)
    return key_error(path + " is not a regular file",
                     "remove it: sudo rm " + shell_word(path) +
                         ", then gpunode install makes a new key");
  if ((info->mode & 077) != 0 || info->uid != 0)
    return key_error(path + " may be read by others than root (mode " +
                         octal(info->mode & 0777) + ")",
                     "sudo chown root:root " + shell_word(path) +
                         " && sudo chmod 600 " + shell_word(path) +
                         "; a key others have read may sign false evidence: "
                         "remove it instead (sudo rm " +
                         shell_word(path) +
                         "), and gpunode install makes and publishes a new "
                         "one");
  return fs.read_file(path, kMaxKeyFile);
}

Result<std::optional<std::string>> read_evidence_public(
    const FileSystem& fs, const std::string& state_dir) {
  const std::string path = evidence_public_path(state_dir);
  // Either half missing: no key (the next install makes a new pair).
  if (!fs.stat(path) || !fs.stat(evidence_private_path(state_dir)))
    return std::optional<std::string>();
  auto priv = read_evidence_private(fs, state_dir);
  if (!priv) return priv.error();
  auto text = fs.read_file(path, kMaxKeyFile);
  if (!text) return text.error();
  return std::optional<std::string>(*text);
}

Result<std::string> ensure_evidence_key(FileSystem& fs,
                                        const std::string& state_dir) {
  auto have = read_evidence_public(fs, state_dir);
  if (!have) return have.error();
  if (*have) return **have;
  // gpunode's own state dir, made and checked as install makes it.
  if (auto r = prepare_state_dir(fs, state_dir); !r) return r.error();
  auto pair = bundle::generate_keypair();
  if (!pair) return pair.error();
  if (auto r = fs.write_file_atomic(evidence_private_path(state_dir),
                                    pair->private_pem, 0600);
      !r)
    return r.error();
  if (auto r = fs.write_file_atomic(evidence_public_path(state_dir),
                                    pair->public_pem, 0644);
      !r)
    return r.error();
  return pair->public_pem;
}

}  // namespace gpunode
