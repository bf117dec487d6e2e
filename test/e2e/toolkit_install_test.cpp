// The toolkit stage installs the bundle's NVIDIA container toolkit packages
// with the real package managers: rpm --root into a simulated host tree
// with an rpm database, and dpkg --root into a copy of a debootstrapped
// Debian tree (packaging/chroot-cache.sh). The packages are the stand-ins of
// test/tools/make-toolkit-packages.sh.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gpunode/digest.hpp"
#include "gpunode/text.hpp"
#include "test_support.hpp"
#include "toolkit_bundle.hpp"

using gpunode::test::BuiltPackage;
using gpunode::test::make_bundle_packages;
using gpunode::test::make_host_tree;
using gpunode::test::Run;
using gpunode::test::run_gpunode;
using gpunode::test::run_with_sim;
using gpunode::test::snapshot_host_tree;
using gpunode::test::snapshot_tree;
using gpunode::test::TempDir;
using gpunode::test::write_toolkit_bundle;
using json = nlohmann::json;

namespace {

// The toolkit stage's --json event (the last one: install reports the
// check, then what it applied).
json toolkit_event(const std::string& out) {
  return gpunode::test::last_stage_event(out, "toolkit");
}

// A node without the toolkit (host-tree.sh no-toolkit) whose packages rpm
// manages (an empty database at /var/lib/rpm), and where its bundle goes.
struct RpmNode {
  TempDir t;
  std::string root = t.path() + "/node";
  std::string bundle = t.path() + "/bundle";
  RpmNode() {
    make_host_tree(root, "no-toolkit");
    Run r = run_with_sim(
        {"rpm", "--root", root, "--dbpath", "/var/lib/rpm", "--initdb"});
    REQUIRE(r.exit_code == 0);
  }
  // The four stand-ins of `version` for `family`, built under the scratch
  // directory.
  std::vector<BuiltPackage> packages(const std::string& family,
                                     const std::string& version) const {
    return make_bundle_packages(t.path() + "/" + family + "-" + version, family,
                                version);
  }
};

// "name version" per installed toolkit package, sorted, as rpm sees them.
std::string rpm_installed(const std::string& root) {
  Run r = run_with_sim({"rpm", "--root", root, "--dbpath", "/var/lib/rpm",
                        "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\n"});
  REQUIRE(r.exit_code == 0);
  std::istringstream in(r.out);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  return text;
}

std::string all_at(const std::string& version) {
  return "libnvidia-container-tools " + version + "\nlibnvidia-container1 " +
         version + "\nnvidia-container-toolkit " + version +
         "\nnvidia-container-toolkit-base " + version + "\n";
}

void rpm_install(const std::string& root,
                 const std::vector<BuiltPackage>& packages) {
  std::vector<std::string> argv{"rpm",      "--root",       root,
                                "--dbpath", "/var/lib/rpm", "-U"};
  for (const auto& p : packages) argv.push_back(p.source);
  Run r = run_with_sim(argv);
  REQUIRE(r.exit_code == 0);
}

Run gpunode_toolkit(const std::string& command, const std::string& root,
                    const std::string& bundle,
                    std::vector<std::string> extra = {}) {
  std::vector<std::string> args{
      command,    "--root",  root,
      "--bundle", bundle,    "--insecure-skip-signature",
      "--only",   "toolkit", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_gpunode(args);
}

// The host tree as a refused run must leave it (snapshot_host_tree), but
// for rpm's SQLite shared-memory file: every reader of a WAL database
// rewrites that index (sqlite.org/wal.html, "The WAL-Index"), a query too.
// The database's content is compared with rpm -qa.
std::map<std::string, std::string> host_state(const std::string& root) {
  auto snap = snapshot_host_tree(root);
  snap.erase("/var/lib/rpm/rpmdb.sqlite-shm");
  return snap;
}

// The paths whose entry differs between two snapshots, for the message
// of a failed comparison.
std::string changed(const std::map<std::string, std::string>& a,
                    const std::map<std::string, std::string>& b) {
  std::string text;
  for (const auto& [path, v] : a)
    if (!b.count(path) || b.at(path) != v) text += path + " ";
  for (const auto& [path, v] : b)
    if (!a.count(path)) text += path + " ";
  return text;
}

}  // namespace

TEST_CASE(
    "toolkit: rpm --root installs the bundle's four packages, and a rerun is "
    "satisfied",
    "[e2e][toolkit][packages]") {
  RpmNode node;
  const std::string& root = node.root;
  const std::string& bundle = node.bundle;
  auto rpms = node.packages("rpm", "1.17.8-1");
  auto debs = node.packages("deb", "1.17.8-1");
  rpms.insert(rpms.end(), debs.begin(), debs.end());
  write_toolkit_bundle(bundle, rpms);
  const auto bundle_before = snapshot_tree(bundle);

  // plan: what install would do, the byte total, and nothing changes.
  const auto before = host_state(root);
  Run plan = gpunode_toolkit("plan", root, bundle);
  INFO(plan.err);
  const json p = toolkit_event(plan.out);
  CHECK(p.value("code", "") == "toolkit.install");
  CHECK(p["facts"]["packages"]["family"] == "rpm");
  CHECK(p["facts"]["packages"]["arch"] == "x86_64");
  CHECK(p["facts"]["packages"]["bundle_version"] == "1.17.8-1");
  CHECK(p["facts"]["packages"]["installed"]["nvidia-container-toolkit"] ==
        nullptr);
  CHECK(p["facts"]["packages"]["files"].size() == 4);
  CHECK(p["facts"]["packages"]["machine"] == "x86_64");
  CHECK(p["facts"]["packages"]["query_error"] == nullptr);
  CHECK(p["facts"]["packages"]["bytes"].get<std::uint64_t>() > 0);
  // The human line states the same size as the facts, in KiB.
  const std::string size = gpunode::human_bytes(
      p["facts"]["packages"]["bytes"].get<std::uint64_t>());
  CHECK_THAT(size, Catch::EndsWith(" KiB"));
  CHECK_THAT(plan.err,
             Catch::Contains("would") &&
                 Catch::Contains("install nvidia-container-toolkit, ") &&
                 Catch::Contains("4 file(s), " + size + ") from the bundle"));
  CHECK(changed(host_state(root), before) == "");

  Run r = gpunode_toolkit("install", root, bundle);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(rpm_installed(root) == all_at("1.17.8-1"));
  CHECK(std::filesystem::exists(root + "/usr/bin/nvidia-container-runtime"));
  // rpm read private copies in the state dir, which are gone afterwards.
  for (const auto& e :
       std::filesystem::directory_iterator(root + "/var/lib/gpunode"))
    CHECK(e.path().filename().string().rfind("toolkit-packages.", 0) ==
          std::string::npos);

  Run again = gpunode_toolkit("install", root, bundle);
  INFO(again.err);
  CHECK(again.exit_code == 0);
  const json s = toolkit_event(again.out);
  CHECK(s.value("status", "") == "satisfied");
  CHECK(s["facts"]["packages"]["installed"]["libnvidia-container1"] ==
        "1.17.8-1");
  CHECK(s["facts"]["packages"]["files"].empty());
  CHECK(snapshot_tree(bundle) == bundle_before);  // the stick is never written
}

TEST_CASE("toolkit: after the install the handler stage says k3s must restart",
          "[e2e][toolkit][packages]") {
  RpmNode node;
  const std::string& root = node.root;
  const std::string& bundle = node.bundle;
  write_toolkit_bundle(bundle, node.packages("rpm", "1.17.8-1"));
  Run r =
      run_gpunode({"install", "--root", root, "--bundle", bundle,
                   "--insecure-skip-signature", "--only", "toolkit,handler"});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(rpm_installed(root) == all_at("1.17.8-1"));
  CHECK_THAT(r.err, Catch::Contains("systemctl restart k3s"));
  CHECK_THAT(r.err, Catch::Contains("--restart-k3s"));
}

TEST_CASE(
    "toolkit: another installed version is kept without --upgrade-toolkit "
    "and replaced with it",
    "[e2e][toolkit][packages]") {
  RpmNode node;
  const std::string& root = node.root;
  const std::string& bundle = node.bundle;
  const auto old_set = node.packages("rpm", "1.16.2-1");
  const auto new_set = node.packages("rpm", "1.17.8-1");

  SECTION("an older version installed, the bundle's newer") {
    rpm_install(root, old_set);
    write_toolkit_bundle(bundle, new_set);
    const auto before = host_state(root);
    Run kept = gpunode_toolkit("install", root, bundle);
    INFO(kept.err);
    CHECK(kept.exit_code == 0);
    const json k = toolkit_event(kept.out);
    CHECK(k.value("status", "") == "satisfied");
    CHECK(k["facts"]["packages"]["installed"]["nvidia-container-toolkit"] ==
          "1.16.2-1");
    CHECK_THAT(kept.err, Catch::Contains("1.16.2-1") &&
                             Catch::Contains("1.17.8-1") &&
                             Catch::Contains("--upgrade-toolkit"));
    CHECK(rpm_installed(root) == all_at("1.16.2-1"));
    CHECK(changed(host_state(root), before) == "");

    Run up = gpunode_toolkit("install", root, bundle, {"--upgrade-toolkit"});
    INFO(up.err);
    CHECK(up.exit_code == 0);
    CHECK(rpm_installed(root) == all_at("1.17.8-1"));
  }
  SECTION("a newer version installed, the bundle's older (rpm --oldpackage)") {
    rpm_install(root, new_set);
    write_toolkit_bundle(bundle, old_set);
    Run down = gpunode_toolkit("install", root, bundle, {"--upgrade-toolkit"});
    INFO(down.err);
    CHECK(down.exit_code == 0);
    CHECK(rpm_installed(root) == all_at("1.16.2-1"));
  }
  SECTION("another version's library without the runtime is blocked") {
    rpm_install(root, {old_set[3]});  // libnvidia-container1 alone
    write_toolkit_bundle(bundle, new_set);
    const auto before = host_state(root);
    Run r = gpunode_toolkit("install", root, bundle);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(toolkit_event(r.out).value("code", "") == "toolkit.other-version");
    CHECK_THAT(r.err, Catch::Contains("--upgrade-toolkit"));
    CHECK(changed(host_state(root), before) == "");
  }
}

TEST_CASE(
    "toolkit: a set whose dependency rpm cannot meet is blocked and the rpm "
    "database is unchanged",
    "[e2e][toolkit][packages]") {
  RpmNode node;
  const std::string& root = node.root;
  const std::string& bundle = node.bundle;
  auto set = node.packages("rpm", "1.17.8-1");
  std::string said;
  int exit_code = 1;
  std::string verdict = "rpm could not install";
  SECTION("a dependency of another version") {
    // nvidia-container-toolkit 1.17.8-1 needs nvidia-container-toolkit-base
    // of exactly its version; this set brings 1.17.9-1's.
    set[1] = node.packages("rpm", "1.17.9-1")[1];
    said = "nvidia-container-toolkit-base";
  }
  SECTION("a file that is no rpm") {
    // A hand-made bundle.toml can list anything with its right hash; the
    // bundle's verification reads each package's own header, so it is
    // refused there (exit 4), before rpm is asked.
    set[0].source = node.t.path() + "/bad.rpm";
    gpunode::test::write_text(set[0].source, "not an rpm\n");
    set[0].entry.file = "packages/rpm/bad.rpm";
    set[0].entry.sha256 = gpunode::sha256_hex("not an rpm\n");
    said = "packages/rpm/bad.rpm: it is neither a .deb nor an .rpm";
    exit_code = 4;
    verdict = "package rpm nvidia-container-toolkit";
  }
  write_toolkit_bundle(bundle, set);
  const auto before = host_state(root);
  Run r = gpunode_toolkit("install", root, bundle);
  INFO(r.err);
  CHECK(r.exit_code == exit_code);
  CHECK_THAT(r.err, Catch::Contains(verdict) && Catch::Contains(said));
  CHECK(rpm_installed(root).empty());
  CHECK(changed(host_state(root), before) == "");
}

TEST_CASE(
    "toolkit: a bundle without this host's family is blocked naming what it "
    "carries",
    "[e2e][toolkit][packages]") {
  RpmNode node;
  const std::string& root = node.root;
  const std::string& bundle = node.bundle;
  write_toolkit_bundle(bundle, node.packages("deb", "1.17.8-1"));
  const auto before = host_state(root);
  Run r = gpunode_toolkit("install", root, bundle);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  const json b = toolkit_event(r.out);
  CHECK(b.value("code", "") == "toolkit.missing");
  CHECK(b["facts"]["packages"]["carried"] == "deb amd64 1.17.8-1");
  CHECK_THAT(r.err,
             Catch::Contains("the bundle carries deb amd64 1.17.8-1 only"));
  CHECK(changed(host_state(root), before) == "");
}

TEST_CASE("toolkit: dpkg --root installs the bundle's debs into a Debian tree",
          "[.][package][dpkg-chroot]") {
  TempDir t;
  Run cache = run_with_sim(
      {std::string(GPUNODE_TEST_SIM) + "/../../packaging/chroot-cache.sh"});
  if (cache.exit_code == gpunode::test::kSkipExitCode)
    GPUNODE_SKIP("no Debian tree: " + cache.err);
  REQUIRE(cache.exit_code == 0);
  std::string cached = cache.out.substr(0, cache.out.find('\n'));
  // A copy: the cache is never entered (packaging/chroot-cache.sh).
  const std::string root = t.path() + "/root";
  REQUIRE(run_with_sim({"cp", "-a", cached, root}).exit_code == 0);
  const std::string bundle = t.path() + "/bundle";
  write_toolkit_bundle(
      bundle, make_bundle_packages(t.path() + "/deb", "deb", "1.17.8-1"));

  Run r = gpunode_toolkit("install", root, bundle);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  Run q =
      run_with_sim({"dpkg-query", "--admindir=" + root + "/var/lib/dpkg", "-W",
                    "-f", "${Package} ${Version} ${db:Status-Abbrev}\n",
                    "nvidia-container-toolkit", "nvidia-container-toolkit-base",
                    "libnvidia-container-tools", "libnvidia-container1"});
  CHECK(q.exit_code == 0);
  CHECK_THAT(q.out, Catch::Contains("nvidia-container-toolkit 1.17.8-1 ii") &&
                        Catch::Contains("libnvidia-container1 1.17.8-1 ii"));
  CHECK(gpunode::test::read_text(root + "/usr/bin/nvidia-container-runtime")
            .find("version 1.17.8") != std::string::npos);
  CHECK(std::filesystem::exists(
      root + "/usr/lib/x86_64-linux-gnu/libnvidia-container.so.1.17.8"));

  Run again = gpunode_toolkit("install", root, bundle);
  CHECK(again.exit_code == 0);
  CHECK(toolkit_event(again.out).value("status", "") == "satisfied");
}

TEST_CASE(
    "toolkit: an rpm that cannot read its database blocks an install, and is "
    "a warning where the runtime is in place",
    "[e2e][toolkit][packages]") {
  RpmNode node;
  const std::string& root = node.root;
  const std::string& bundle = node.bundle;
  const auto set = node.packages("rpm", "1.17.8-1");
  write_toolkit_bundle(bundle, set);
  // rpm exits 1 for a database it cannot open, as for a name not
  // installed; only its silence on stdout tells the two apart.
  const std::string fake = node.t.path() + "/fake-bin";
  std::filesystem::create_directories(fake);
  gpunode::test::write_text(
      fake + "/rpm",
      "#!/bin/sh\necho 'error: cannot open Packages database in "
      "/var/lib/rpm' >&2\nexit 1\n");
  std::filesystem::permissions(fake + "/rpm",
                               std::filesystem::perms::owner_all);
  const std::vector<std::string> env{"PATH=" + fake + ":" + GPUNODE_TEST_SIM +
                                     "/bin:" + std::getenv("PATH")};
  const std::vector<std::string> args{
      "install",  "--root",  root,
      "--bundle", bundle,    "--insecure-skip-signature",
      "--only",   "toolkit", "--json"};

  const auto before = host_state(root);
  Run blocked = gpunode::test::run_gpunode(args, env);
  INFO(blocked.err);
  CHECK(blocked.exit_code == 1);
  const json b = toolkit_event(blocked.out);
  CHECK(b.value("code", "") == "toolkit.packages");
  CHECK_THAT(b["facts"]["packages"]["query_error"].get<std::string>(),
             Catch::Contains("cannot ask rpm"));
  CHECK_THAT(blocked.err, Catch::Contains("cannot ask rpm which toolkit "
                                          "packages are installed"));
  CHECK(changed(host_state(root), before) == "");

  rpm_install(root, set);  // the real rpm: the runtime is in place
  Run warned = gpunode::test::run_gpunode(args, env);
  INFO(warned.err);
  CHECK(warned.exit_code == 0);
  const json w = toolkit_event(warned.out);
  CHECK(w.value("status", "") == "satisfied");
  CHECK_THAT(w.dump(), Catch::Contains("cannot tell whether the toolkit "
                                       "packages are the bundle's"));
}

namespace {

// The stand-ins with a postinst that sleeps `seconds` (the first time it
// runs), in the node's bundle.
void write_slow_bundle(const gpunode::test::DpkgNode& node,
                       const std::string& seconds) {
  write_toolkit_bundle(node.bundle,
                       make_bundle_packages(node.t.path() + "/deb", "deb",
                                            "1.17.8-1", "amd64", seconds));
}

// The error event's message (the last one).
std::string error_message(const std::string& out) {
  std::string message;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == "error")
      message = j.value("message", "");
  }
  return message;
}

// A helper process that holds an fcntl(2) write lock on a file, as dpkg,
// apt and rpm take theirs, until this is destroyed. (Not the test process
// itself: any close of the file there, a snapshot's, would drop the lock.)
class HeldLock {
 public:
  explicit HeldLock(const std::string& path) {
    int ready[2], release[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(release, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {  // only async-signal-safe calls from here
      ::close(ready[0]);
      ::close(release[1]);
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
      struct flock fl {};
      fl.l_type = F_WRLCK;
      fl.l_whence = SEEK_SET;
      const char ok = fd >= 0 && ::fcntl(fd, F_SETLK, &fl) == 0 ? 'y' : 'n';
      (void)!::write(ready[1], &ok, 1);
      char c;
      (void)!::read(release[0], &c, 1);  // until the test closes its end
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_ = release[1];
    char ok = 'n';
    (void)!::read(ready[0], &ok, 1);
    ::close(ready[0]);
    REQUIRE(ok == 'y');
  }
  ~HeldLock() {
    ::close(release_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
};

}  // namespace

TEST_CASE(
    "toolkit: SIGINT, twice, during dpkg's transaction waits for it to "
    "finish: exit 130, the four packages installed",
    "[e2e][toolkit][packages][dpkg]") {
  if (const auto why = gpunode::test::dpkg_node_unavailable(); !why.empty())
    GPUNODE_SKIP(why);
  gpunode::test::DpkgNode node;
  write_slow_bundle(node, "2");
  gpunode::test::Background run(node.install_argv(), node.env());
  {
    INFO(run.err_so_far());
    REQUIRE(node.wait_for_postinst());
  }
  ::kill(run.pid(), SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(run.pid(), SIGINT);  // a second Ctrl-C does not cut it either
  Run r = run.wait();
  INFO(r.err);
  CHECK(r.exit_code == 130);
  CHECK_THAT(r.err, Catch::Contains("SIGINT: waiting for dpkg to finish its "
                                    "transaction; gpunode stops after it"));
  CHECK_THAT(r.err, Catch::Contains("SIGINT again: still waiting for dpkg"));
  // The true outcome, not "finished or undone".
  const std::string said = error_message(r.out);
  CHECK_THAT(said, Catch::Contains("interrupted by SIGINT while dpkg "
                                   "installed the toolkit packages") &&
                       Catch::Contains("dpkg finished it, and") &&
                       Catch::Contains("are installed at 1.17.8-1"));
  CHECK(said.find("finished or undone") == std::string::npos);
  CHECK(node.states() == gpunode::test::all_installed_states());
  // The next run has nothing left to do.
  Run again = run_with_sim(node.install_argv());
  CHECK(again.exit_code == 0);
  CHECK(toolkit_event(again.out).value("status", "") == "satisfied");
}

TEST_CASE(
    "toolkit: the --timeout running out during dpkg's transaction waits for "
    "it: exit 3 with the true outcome",
    "[e2e][toolkit][packages][dpkg]") {
  if (const auto why = gpunode::test::dpkg_node_unavailable(); !why.empty())
    GPUNODE_SKIP(why);
  gpunode::test::DpkgNode node;
  write_slow_bundle(node, "3");
  Run r = run_with_sim(node.install_argv({"--timeout", "2s"}));
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("the --timeout ran out: waiting for dpkg "
                                    "to finish its transaction"));
  CHECK_THAT(error_message(r.out),
             Catch::Contains("dpkg finished it, and") &&
                 Catch::Contains("are installed at 1.17.8-1"));
  CHECK(node.states() == gpunode::test::all_installed_states());
}

TEST_CASE(
    "toolkit: dpkg's lock held by another process is waited for, naming "
    "the holder, within the --timeout",
    "[e2e][toolkit][packages][dpkg]") {
  if (const auto why = gpunode::test::dpkg_node_unavailable(); !why.empty())
    GPUNODE_SKIP(why);
  gpunode::test::DpkgNode node;
  write_toolkit_bundle(node.bundle, make_bundle_packages(node.t.path() + "/deb",
                                                         "deb", "1.17.8-1"));
  const std::string lock = node.root + "/var/lib/dpkg/lock-frontend";
  SECTION("released while gpunode waits: it installs") {
    auto held = std::make_unique<HeldLock>(lock);
    const std::string holder = "held by process " + std::to_string(held->pid());
    // A bounded --timeout: a lock never seen free fails in a minute.
    gpunode::test::Background run(node.install_argv({"--timeout", "60s"}),
                                  node.env());
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (run.err_so_far().find("Waiting for cache lock") ==
           std::string::npos) {
      REQUIRE(std::chrono::steady_clock::now() < until);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    held.reset();
    Run r = run.wait();
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("Waiting for cache lock: Could not get "
                                      "lock " +
                                      lock + ". It is " + holder));
    CHECK(node.states() == gpunode::test::all_installed_states());
  }
  SECTION(
      "held past the --timeout: exit 3 naming the holder, nothing "
      "installed") {
    HeldLock held(lock);
    const std::string holder = "held by process " + std::to_string(held.pid());
    const auto before = snapshot_host_tree(node.root);
    Run r = run_with_sim(node.install_argv({"--timeout", "2s"}));
    INFO(r.err);
    CHECK(r.exit_code == 3);
    const std::string said = error_message(r.out);
    CHECK_THAT(said, Catch::Contains("the --timeout ran out waiting for "
                                     "dpkg's lock") &&
                         Catch::Contains(holder + " (") &&
                         Catch::Contains("nothing was installed"));
    CHECK_THAT(r.err, Catch::Contains("never remove the lock file"));
    CHECK(r.err.find("dependenc") == std::string::npos);
    CHECK(node.states().empty());
    CHECK(changed(snapshot_host_tree(node.root), before) == "");
  }
}

TEST_CASE(
    "toolkit: rpm's transaction lock held past the --timeout is exit 3 "
    "naming the holder, the database unchanged",
    "[e2e][toolkit][packages]") {
  RpmNode node;
  write_toolkit_bundle(node.bundle, node.packages("rpm", "1.17.8-1"));
  const std::string lock = node.root + "/var/lib/rpm/.rpm.lock";
  HeldLock held(lock);
  const auto before = host_state(node.root);
  Run r =
      gpunode_toolkit("install", node.root, node.bundle, {"--timeout", "2s"});
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("Waiting for cache lock: Could not get "
                                    "lock " +
                                    lock + ". It is held by process " +
                                    std::to_string(held.pid())));
  CHECK_THAT(error_message(r.out),
             Catch::Contains("the --timeout ran out waiting for rpm's lock"));
  CHECK(rpm_installed(node.root).empty());
  CHECK(changed(host_state(node.root), before) == "");
}
