// The bad-input corpus, gpunode's own state and the terminal (issue
// "Hardening", items 1, 2 and 4): the lock, the journal and the state dir
// planted with links or left open to other users, and names from untrusted
// input that carry terminal control sequences. The runner (see
// bad_inputs_runner.cpp) proves that nothing outside the state dir changed,
// the scratch dir beside the tree included: a link's target lives there.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <stdexcept>

#include "bad_inputs.hpp"

using namespace gpunode::test;
using namespace gpunode::test::bad;

namespace {

const std::vector<std::string> kHostOnly = {"--only", "driver,toolkit,handler"};

std::string state(const Env& e) { return e.root + "/var/lib/gpunode"; }

void must(int rc, const std::string& what) {
  if (rc != 0) throw std::runtime_error(what);
}

// The state dir, made as gpunode makes it (0755), for a case to damage.
std::string made_state(const Env& e) {
  must(::mkdir(state(e).c_str(), 0755), "mkdir " + state(e));
  return state(e);
}

// A file of the operator's, beside the tree: what a planted link points at.
std::string precious(const Env& e) {
  const std::string p = e.dir + "/precious.txt";
  write_text(p, "the operator's data\n", 0644);
  return p;
}

}  // namespace

TEST_CASE("bad inputs: the state dir and its files", "[e2e][bad-inputs]") {
  const std::vector<BadInput> cases = {
      damaged(
          "lock is a symbolic link to another file", "good-v3",
          [](Env& e) {
            const std::string dir = made_state(e);
            must(::symlink(precious(e).c_str(), (dir + "/lock").c_str()),
                 "symlink");
          },
          5,
          "refusing the lock file /var/lib/gpunode/lock: it is a symbolic "
          "link",
          kHostOnly),
      damaged(
          "lock is a hard link to another file", "good-v3",
          [](Env& e) {
            const std::string dir = made_state(e);
            must(::link(precious(e).c_str(), (dir + "/lock").c_str()), "link");
          },
          5, "(a hard link to another file)", kHostOnly),
      damaged(
          "lock is a FIFO", "good-v3",
          [](Env& e) { replace_with_fifo(made_state(e) + "/lock"); }, 5,
          "lock: it is not a regular file", kHostOnly),
      damaged(
          "state dir writable by everyone", "good-v3",
          [](Env& e) { must(::chmod(made_state(e).c_str(), 0777), "chmod"); },
          5, "is writable by everyone (mode 0777)", kHostOnly),
      damaged(
          "state dir writable by its group, sticky or not", "good-v3",
          [](Env& e) { must(::chmod(made_state(e).c_str(), 01770), "chmod"); },
          5, "sudo chmod go-w", kHostOnly),
      damaged(
          "a parent of the state dir owned by another user", "good-v3",
          [](Env& e) {
            must(::chown((e.root + "/var/lib").c_str(), 65534, 65534), "chown");
          },
          5, "/var/lib is owned by uid 65534, not root", kHostOnly),
      damaged(
          "a parent writable by everyone without the sticky bit: nothing made",
          "good-v3",
          [](Env& e) {
            must(::mkdir((e.root + "/srv").c_str(), 0755), "mkdir");
            must(::chmod((e.root + "/srv").c_str(), 0777), "chmod");
          },
          5, "/srv is writable by everyone",
          {"--state-dir", "/srv/gpunode", "--only", "driver"}),
      damaged(
          "the state dir is a link owned by another user", "good-v3",
          [](Env& e) {
            must(::mkdir((e.root + "/srv").c_str(), 0755), "mkdir");
            must(::symlink("/srv", state(e).c_str()), "symlink");
            must(::lchown(state(e).c_str(), 65534, 65534), "lchown");
          },
          5, "(a symbolic link) is owned by uid 65534", kHostOnly),
      damaged("a state dir that cannot be made leaves nothing it made",
              "good-v3", [](Env&) {}, 5, "cannot create directory",
              {"--state-dir", "/var/lib/new-a/new-b/" + std::string(300, 'x'),
               "--only", "driver"}),
      damaged(
          "journal is a symbolic link: replaced, its target untouched",
          "good-v3",
          [](Env& e) {
            const std::string dir = made_state(e);
            must(
                ::symlink(precious(e).c_str(), (dir + "/journal.json").c_str()),
                "symlink");
          },
          0, "is a symbolic link: ignored", kHostOnly),
  };
  run_table("state", cases);
}

// With --root / the state dir is a path of this machine: a --state-dir
// under /tmp with a planted lock link (the run stops at the lock, before
// any stage looks at the host).
TEST_CASE("a lock link under --root / is refused and its target kept",
          "[e2e][bad-inputs]") {
  TempDir t;
  const std::string dir = t.path() + "/state";
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  const std::string target = t.path() + "/precious.txt";
  write_text(target, "the operator's data\n");
  REQUIRE(::symlink(target.c_str(), (dir + "/lock").c_str()) == 0);
  Run r = run_gpunode({"install", "--root", "/", "--state-dir", dir});
  INFO(r.err);
  CHECK(r.exit_code == 5);
  CHECK_THAT(r.err, Catch::Contains("it is a symbolic link"));
  CHECK(read_text(target) == "the operator's data\n");
}

TEST_CASE("a journal link is replaced the same way with --root / and --root",
          "[e2e][bad-inputs]") {
  // The table covers --root DIR; this is the same case with --root /.
  TempDir t;
  const std::string dir = t.path() + "/state";
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  const std::string target = t.path() + "/precious.txt";
  write_text(target, "the operator's data\n");
  REQUIRE(::symlink(target.c_str(), (dir + "/journal.json").c_str()) == 0);
  // No k3s on this machine: preflight blocks (exit 1) after the journal
  // was read and written.
  Run r = run_gpunode(
      {"install", "--root", "/", "--state-dir", dir, "--only", "preflight"});
  INFO(r.err);
  CHECK_THAT(r.err, Catch::Contains("is a symbolic link: ignored"));
  CHECK(read_text(target) == "the operator's data\n");
  struct stat st {};
  REQUIRE(::lstat((dir + "/journal.json").c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
}

TEST_CASE("bad inputs: terminal control sequences in untrusted text",
          "[e2e][bad-inputs]") {
  // The runner checks every case's stderr for raw control characters; these
  // cases bring them from each kind of source and name the escaped form.
  const std::vector<BadInput> cases = {
      {"a file on the stick whose name erases the error line", "good-v3",
       kBundle,
       [](Env& e) {
         write_text(e.bundle + "/images/\x1b[2K\x1b[1Aok.tar", "x");
         return e.install({"--bundle", e.bundle, "--trust-key", e.key_pub});
       },
       4, "\\e[2K\\e[1Aok.tar"},
      {"nvidia-smi output with an OSC sequence", "good-v3", kNone,
       [](Env& e) {
         e.env.push_back(
             "GPUNODE_SIM_GPU_DRIVER=\x1b]0;owned\x07"
             "580.1");
         return e.install({"--only", "driver"});
       },
       1, "driver_version '\\e]0;owned\\x07580.1' is not a version"},
      {"a --node value with a C1 control", "good-v3", kNone,
       [](Env& e) {
         return e.install({"--node",
                           "gpu\xc2\x9b"
                           "2K"});
       },
       2, "gpu\\u009B2K"},
  };
  run_table("terminal", cases);
}

// Root on a read-only state dir: the fix names the read-only mount, not
// "run as root" (which root already does).
TEST_CASE("a read-only state dir is named as such, to root",
          "[e2e][bad-inputs]") {
  if (::geteuid() != 0) GPUNODE_SKIP("needs root to mount a read-only tmpfs");
  TempDir t;
  const std::string dir = t.path() + "/state";
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  Run m = run_with_sim({"mount", "-t", "tmpfs", "-o", "ro,size=64k,mode=0755",
                        "gpunode-test", dir});
  INFO(m.err);
  REQUIRE(m.exit_code == 0);
  Run r = run_gpunode({"install", "--root", "/", "--state-dir", dir});
  run_with_sim({"umount", dir});
  INFO(r.err);
  CHECK(r.exit_code == 5);
  CHECK_THAT(r.err, Catch::Contains("mounted read-only"));
  CHECK_THAT(r.err, !Catch::Contains("run as root"));
}

TEST_CASE("a mistyped command or flag holding escapes is named escaped",
          "[e2e][bad-inputs]") {
  Run cmd = run_gpunode({"inst\x1b[2Kall"});
  INFO(cmd.err);
  CHECK(cmd.exit_code == 2);
  CHECK(cmd.err.find('\x1b') == std::string::npos);
  CHECK_THAT(cmd.err, Catch::Contains("inst\\e[2Kall"));
  Run flag = run_gpunode({"install", "--fro\x1b]0;x\x07"});
  INFO(flag.err);
  CHECK(flag.exit_code == 2);
  CHECK(flag.err.find('\x1b') == std::string::npos);
  CHECK(flag.err.find('\x07') == std::string::npos);
}
