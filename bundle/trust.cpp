#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gpunode/bundle_trust.hpp"
#include "gpunode/trust_anchor.hpp"
#include "gpunode/unique_fd.hpp"

namespace gpunode::bundle {
// Reads a key file named on the command line (not under --root: the operator
// named it directly), capped, without following a final link.
Result<std::string> read_key_file(const std::string& path,
                                  const std::string& flag,
                                  std::size_t max_bytes,
                                  const std::string& what) {
  // O_NONBLOCK: opening a FIFO blocks until a writer comes; it is refused
  // below with every other non-regular file.
  const UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  const int fd = file.get();
  if (!file)
    return usage_error(flag + ": cannot read '" + path +
                       "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return usage_error(flag + ": '" + path + "' is not a regular file");
  }
  std::string data;
  // The whole cap at once: a string that grew would leave the bytes it
  // moved behind, unwiped.
  data.reserve(max_bytes);
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      OPENSSL_cleanse(data.data(), data.size());
      return usage_error(flag + ": cannot read '" + path +
                         "': " + std::strerror(e));
    }
    if (n == 0) break;
    if (data.size() + static_cast<std::size_t>(n) > max_bytes) {
      OPENSSL_cleanse(data.data(), data.size());
      OPENSSL_cleanse(buf, sizeof buf);
      return usage_error(flag + ": '" + path + "' is too large for " + what +
                         " (more than " + std::to_string(max_bytes) +
                         " bytes)");
    }
    data.append(buf, static_cast<std::size_t>(n));
  }
  OPENSSL_cleanse(buf, sizeof buf);
  return data;
}

Result<VerifyOptions> trust_options(const FileSystem& fs,
                                    const std::vector<std::string>& key_files,
                                    bool insecure_skip_signature,
                                    const std::string& keys_origin) {
  std::vector<std::string> dir_keys;  // host paths
  for (const std::string& name : fs.list_dir(kTrustedKeysDir)) {
    if (name.size() >= 4 && name.compare(name.size() - 4, 4, ".pub") == 0)
      dir_keys.push_back(std::string(kTrustedKeysDir) + "/" + name);
  }
  // A trusted key is a promise: a bundle it did not sign is refused. The
  // flag must not quietly take that back, whoever set the key (the operator
  // now, the environment, the site config, the node's administrator).
  if (insecure_skip_signature && (!key_files.empty() || !dir_keys.empty())) {
    const std::string where = !key_files.empty()
                                  ? keys_origin + " (" + key_files.front() + ")"
                                  : fs.resolve(dir_keys.front());
    return Error{
        ExitCode::kUsage, "usage",
        "--insecure-skip-signature: refused, a key is trusted: " + where +
            "; with a trusted key a bundle it did not sign is always refused",
        "drop --insecure-skip-signature (the bundle must then be signed by "
        "that key); to accept unsigned bundles on this node, remove the key "
        "from " +
            (!key_files.empty() ? keys_origin : fs.resolve(kTrustedKeysDir))};
  }
  VerifyOptions options;
  options.insecure_skip_signature = insecure_skip_signature;
  for (const std::string& path : key_files) {
    if (auto safe = check_trust_anchor(path, "trusted key"); !safe)
      return safe.error();
    // Errors name where the path came from: the flag, the variable, or
    // config.toml and its line.
    auto key = read_key_file(path, keys_origin);
    if (!key) return key.error();
    if (key_fingerprint(*key).empty()) {
      return usage_error(keys_origin + ": '" + path +
                         "' is not a PEM Ed25519 public key");
    }
    options.trust_keys.push_back(std::move(*key));
  }
  // Keys the node's administrator installed once, for every bundle. The
  // directory is an anchor even when empty: whoever can write it can add a
  // key.
  if (fs.stat(kTrustedKeysDir)) {
    if (auto safe = check_trust_anchor(fs.resolve(kTrustedKeysDir),
                                       "trusted-keys directory");
        !safe)
      return safe.error();
  }
  for (const std::string& path : dir_keys) {
    if (auto safe = check_trust_anchor(fs.resolve(path), "trusted key"); !safe)
      return safe.error();
    auto key = fs.read_file(path, kMaxKeyBytes);
    if (!key) return key.error();
    if (key_fingerprint(*key).empty()) {
      return Error{ExitCode::kUsage, "bundle",
                   path + " is not a PEM Ed25519 public key",
                   "replace or remove it"};
    }
    options.trust_keys.push_back(std::move(*key));
  }
  if (options.trust_keys.empty() && !insecure_skip_signature) {
    return Error{
        ExitCode::kIntegrity, "bundle",
        "no trusted key: cannot tell who made this bundle",
        "trust the publisher's key with --trust-key PUBLISHER.pub (or install "
        "it as " +
            std::string(kTrustedKeysDir) +
            "/NAME.pub), or accept an unchecked bundle explicitly with "
            "--insecure-skip-signature"};
  }
  return options;
}

}  // namespace gpunode::bundle
