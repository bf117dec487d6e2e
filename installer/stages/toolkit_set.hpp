// The toolkit stage's view of the bundle's NVIDIA container toolkit
// packages: the set that fits this host (its package family and
// architecture), where each file is on the stick, and what of it the host
// already has installed.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/context.hpp"
#include "host/package_manager.hpp"

namespace gpunode {

struct ToolkitSet {
  PackageManager pm;
  std::string machine;  // uname -m
  std::string arch;     // package_arch(pm.family, machine); may be empty
  // The four of kToolkitPackageNames for family+arch, in that order; empty
  // when the bundle does not carry the whole set for this host.
  std::vector<bundle::PackageEntry> entries;
  std::vector<std::string> paths;    // bundle dir + "/" + file, per entry
  std::vector<std::uint64_t> sizes;  // of each file
  std::string version;  // nvidia-container-toolkit's version in the set
  // What the bundle carries, for messages: "rpm x86_64 1.17.8-1, deb amd64
  // 1.17.8-1", or "no toolkit packages".
  std::string carried;
  InstalledVersions installed;  // of the four names; queried only with a set
  // Those of the four a package transaction left half-way (dpkg's iU, iF,
  // iH, ...): name -> state (PackageQuery::unfinished).
  std::map<std::string, PackageQuery::Unfinished> unfinished;
  // The package manager could not say what is installed (installed is then
  // empty): a block only where an install would follow.
  std::optional<Error> query_error;

  bool complete() const { return !entries.empty(); }
  // "nvidia-container-toolkit (iU: unpacked but not configured), ...".
  std::string unfinished_text() const;
  // Every unfinished package is at the set's version: installing the set
  // again finishes them without changing any version.
  bool unfinished_at_set_version() const;
  // Every package installed at the set's version.
  bool current() const;
  // Some package installed at a version other than the set's.
  bool other_version() const;
  // "1.16.2-1" or "1.16.2-1, 1.17.8-1": the versions installed now.
  std::string installed_text() const;
  // The entries not installed at the set's version: what one transaction
  // installs (rpm -U refuses a package already installed at its version).
  std::vector<std::size_t> to_install() const;
  std::vector<std::string> files_to_install() const;  // paths of to_install()
  std::uint64_t bytes_to_install() const;
  // The "packages" facts (docs/json-events.md, toolkit).
  nlohmann::json facts() const;
};

// nullopt without --bundle. Errors: the bundle's own (it did not verify);
// a package query that did not run is the set's query_error.
Result<std::optional<ToolkitSet>> find_toolkit_set(Context& ctx);

// Without --bundle: what the host's package manager says of the four names
// (one dpkg-query or rpm -q), in a set with no entries and `carried` "no
// bundle". A dpkg killed mid-transaction leaves the runtime's file on disk
// and the packages half-way, which only this query shows. Nothing is asked
// where neither dpkg nor rpm manages the host; a query that did not run is
// query_error (a warning, never a failure of a working node).
ToolkitSet host_toolkit_state(Context& ctx);

}  // namespace gpunode
