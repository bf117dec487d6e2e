// The host's package manager, as the toolkit stage needs it: which family
// manages the system (deb or rpm), what of the NVIDIA toolkit it has
// installed, and the one command that installs a set of package files.
// Everything runs through the Host's ProcessRunner with an argv, never a
// shell, and under --root the package manager's own root option.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpunode/host.hpp"
#include "gpunode/result.hpp"

namespace gpunode {

struct PackageManager {
  std::string family;  // "deb" or "rpm"; empty: neither manages this host
  // The host path of its database: /var/lib/dpkg, /usr/lib/sysimage/rpm or
  // /var/lib/rpm.
  std::string db;
  // /etc/os-release's ID and ID_LIKE ("rhel fedora"), for messages.
  std::string os_id;
  std::string os_like;
  // "ubuntu (like debian)", or "an unknown distribution".
  std::string os_text() const;
};

// dpkg manages the system when <root>/var/lib/dpkg/status exists (dpkg(1),
// FILES), rpm when its database directory does (rpm(8): --dbpath defaults
// to /var/lib/rpm; RPM 4.19 moved it to /usr/lib/sysimage/rpm, leaving a
// link behind on Fedora and RHEL). When both exist (rpm installed on a
// Debian host, or alien), os-release decides: ID or ID_LIKE naming debian
// means deb, naming rhel, fedora or suse means rpm.
PackageManager detect_package_manager(const FileSystem& fs);

// The machine gpunode runs on (uname(2)'s machine: "x86_64", "aarch64").
std::string host_machine();

// name -> the installed version (deb Version, rpm VERSION-RELEASE), or
// nullopt when it is not installed.
using InstalledVersions = std::map<std::string, std::optional<std::string>>;

// What the package manager says of the names asked about.
struct PackageQuery {
  InstalledVersions versions;
  // name -> its state, for a package a transaction left half-way: dpkg's
  // db:Status-Abbrev "iU" (unpacked, not configured), "iF" (half-
  // configured), "iH" (half-installed), "iW"/"it" (triggers awaited or
  // pending), or any with the reinst-required flag ("iHR"). dpkg --audit
  // lists them (dpkg(1)). Their files may be on disk; they are not
  // installed, so not in `versions`.
  struct Unfinished {
    std::string state;    // "iU"
    std::string version;  // the version it was at
  };
  std::map<std::string, Unfinished> unfinished;
};

// What a state of `unfinished` means: "unpacked but not configured", ...
std::string unfinished_state_text(const std::string& abbrev);

// The query's argv: dpkg-query -W -f '${Package} ${Version}
// ${db:Status-Abbrev}\n' NAMES (dpkg-query(1)), with --admindir under a
// --root; rpm -q --qf '%{NAME} %{VERSION}-%{RELEASE}\n' NAMES (rpm(8)),
// with --root and --dbpath.
std::vector<std::string> query_argv(const PackageManager& pm,
                                    const std::string& root,
                                    const std::vector<std::string>& names);
// Reads the query's standard output. A name the output does not report as
// installed is nullopt: dpkg-query names an unknown package on stderr, and a
// known one whose status is not installed ("un ", "rc ") on stdout; rpm
// prints "package NAME is not installed" on stdout.
PackageQuery parse_query(const std::string& family, const std::string& out,
                         const std::vector<std::string>& names);
// Runs the query. It exits 1 when a name is not installed, which is an
// answer; a query that did not run (not found, killed, timed out) is
// ExitCode::kBlocked naming the command.
Result<PackageQuery> installed_versions(ProcessRunner& proc,
                                        const PackageManager& pm,
                                        const std::string& root,
                                        const std::vector<std::string>& names,
                                        std::chrono::milliseconds timeout);

// One transaction of the whole set: dpkg [--root=R] -i F... (dpkg(1)), rpm
// [--root R] --dbpath DB -U --nomanifest F... (rpm(8)); `oldpackage` adds rpm's
// --oldpackage, without which -U refuses a lower version. dpkg -i downgrades
// by itself, with a warning.
std::vector<std::string> install_argv(const PackageManager& pm,
                                      const std::string& root,
                                      const std::vector<std::string>& files,
                                      bool oldpackage);

// The locks a transaction takes, as host paths: dpkg's lock-frontend, then
// lock (dpkg(1), FILES; apt and unattended-upgrades take the same ones);
// rpm's .rpm.lock in its database directory (lib/rpmlock.c).
std::vector<std::string> lock_paths(const PackageManager& pm);

// A process holding a lock: its pid (0 when it is in another PID namespace)
// and its command name (/proc/PID/comm; empty when unknown).
struct LockHolder {
  std::string path;  // the lock file, as the operator's host names it
  int pid = 0;
  std::string command;
  // "process 1234 (unattended-upgr)"
  std::string text() const;
};

// Who holds the fcntl(2) lock on `real_path` (F_GETLK: asks, takes nothing,
// creates nothing), shown as `shown_path`; nullopt when no one does or
// the file does not exist.
std::optional<LockHolder> lock_holder(const std::string& real_path,
                                      const std::string& shown_path);

// dpkg's or rpm's own words for a lock it found held (dpkg: "... lock was
// locked by another process with pid N", "... database is locked by another
// process"; rpm: "can't create transaction lock"), in what it printed.
bool says_locked(const ProcessResult& r);

}  // namespace gpunode
