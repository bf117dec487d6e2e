// `gpunode bundle create`, on the connected side: lays out a bundle directory
// from local image archives and registry pulls, the compiled-in
// manifests and the running binary, writes bundle.toml, and signs it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/bundle.hpp"
#include "gpunode/registry_pull.hpp"
#include "gpunode/result.hpp"

namespace gpunode::bundle {

struct CreateOptions {
  std::string out;  // must not exist, or be an empty directory
  std::vector<std::string>
      image_archives;  // --image-archive, verified like the image stage does
  // --pull: each is pulled straight into images/ (out_path and on_output
  // are set here); name_as must be a locked image's ref.
  std::vector<PullOptions> pulls;
  std::function<void(const std::string&)> note;  // progress lines; optional
  // Sees the bytes of the files copied in ("create", out, their total
  // size); each pull gets it too, unless it has its own.
  Progress* progress = &no_progress();
  std::string self_binary;  // copied as bin/gpunode (/proc/self/exe)
  // The portable build (packaging/build-portable.sh): self_binary is its
  // launcher and these, lib/gpunode/* (glibc's loader, the libraries, the
  // real binary), are copied to lib/gpunode/ so the stick's bin/gpunode
  // runs on hosts with an older glibc. Empty for a plain build.
  std::vector<std::string> runtime_files;
  // The portable tree's Ansible collection: each of collection_files (paths
  // below collections_root) is copied to ansible/collections/<path>, so the
  // controller uses ANSIBLE_COLLECTIONS_PATH=<stick>/ansible/collections.
  // A symlink or other non-regular file among them is refused (kUsage)
  // before anything is written. Empty for a plain build.
  std::string collections_root;
  std::vector<std::string> collection_files;
  // --toolkit-packages: each directory holds NVIDIA's container toolkit
  // set for one family and architecture (toolkit_package_set.hpp), copied
  // to packages/<family>/ and recorded in [[packages]].
  std::vector<std::string> toolkit_package_dirs;
  std::optional<std::string> sign_key_pem;  // --sign-key: Ed25519 private key
  std::string created;  // ISO 8601; "" = SOURCE_DATE_EPOCH or now
  std::string min_driver;
  std::vector<std::string> platforms = {"linux/amd64", "linux/arm64"};
};

struct CreateReport {
  Manifest manifest;
  std::string out;
  bool signed_ = false;
  // Per --toolkit-packages directory, its other files, skipped
  // (ToolkitPackageSet::ignored): (dir, names).
  std::vector<std::pair<std::string, std::vector<std::string>>> ignored;
};

Result<CreateReport> create_bundle(const CreateOptions& options);

// The file name an image's archive gets under images/: the ref's last path
// component and tag, made safe, e.g. nvcr.io/nvidia/k8s-device-plugin:v0.19.3
// -> k8s-device-plugin-v0.19.3.tar.
std::string image_file_name(const std::string& ref);

// The bundle's creation time: `created` when given (checked: ISO 8601 UTC,
// "2026-01-31T12:00:00Z"), else SOURCE_DATE_EPOCH (seconds), else now.
// Errors: ExitCode::kUsage.
Result<std::string> resolve_created(const std::string& created);

}  // namespace gpunode::bundle
