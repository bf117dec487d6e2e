// What bundle.toml records about its files, held to what the files say
// about themselves (verify_bundle's last step, after every hash matched):
// each [[images]] entry's ref and digest against its archive's index.json or
// manifest.json, each [[packages]] entry's family, name, version and arch
// against its .deb control or .rpm header. Cheap: only those documents are
// read (an archive's blobs and a package's payload are covered by the file
// hashes already). The rest bundle.toml records is informational (README.md,
// "bundle verify").
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gpunode/bundle.hpp"
#include "gpunode/result.hpp"
#include "gpunode/unique_fd.hpp"

namespace gpunode::bundle {

// Opens a listed file (by its bundle path) the way verify inspected it: no
// link followed, the same inode. An ExitCode::kCannotRun, kInterrupted or
// kTimeout error is fatal; any other is a problem with that file.
using OpenListedFile = std::function<Result<UniqueFd>(const std::string&)>;

// One line per record that does not match its file, naming the image or
// package; or the fatal error that stopped the check.
Result<std::vector<std::string>> check_recorded_facts(
    const Manifest& manifest, const OpenListedFile& open_listed);

}  // namespace gpunode::bundle
