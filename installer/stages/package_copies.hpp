// The bundle's toolkit packages, copied off the stick into a private
// directory of gpunode's state dir and hashed as they are copied, each held
// to bundle.toml's SHA-256. The bundle was verified when the run began, but
// dpkg and rpm read the files again later and run the packages' scripts as
// root: a failing stick, or a device that answers the second read with
// other bytes, must not get anything but what the signed manifest names
// installed. The copies are what the package manager reads.
#pragma once

#include <string>
#include <vector>

#include "gpunode/result.hpp"

namespace gpunode {

struct PackageToCopy {
  std::string source;  // real path on the stick
  std::string name;    // bundle.toml's file, for messages
  std::string sha256;  // bundle.toml's, lower-case hex
};

class PackageCopies {
 public:
  // Makes `<state_dir_real>/toolkit-packages.XXXXXX` (0700), after removing
  // any such directory an interrupted run left (the caller holds the run
  // lock), and copies each package into it. Errors: kIntegrity naming the
  // file whose bytes differ from bundle.toml's (nothing is left behind);
  // kBlocked when a copy cannot be made (no space, the stick gone).
  static Result<PackageCopies> make(const std::string& state_dir_real,
                                    const std::vector<PackageToCopy>& packages);
  PackageCopies(PackageCopies&& other) noexcept;
  PackageCopies& operator=(PackageCopies&&) = delete;
  PackageCopies(const PackageCopies&) = delete;
  ~PackageCopies();  // removes the directory and the copies

  const std::vector<std::string>& paths() const { return paths_; }

 private:
  PackageCopies() = default;
  std::string dir_;
  std::vector<std::string> paths_;
};

}  // namespace gpunode
