// The runner's promises, with scripted stages on a fake clock.
#include "gpunode/runner.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <sstream>

#include "gpunode/digest.hpp"
#include "gpunode/journal.hpp"
#include "gpunode/run_lock.hpp"
#include "test_support.hpp"

using namespace gpunode;
using gpunode::test::FakeClock;
using gpunode::test::TempDir;

namespace {

// Answers check() from a script (the last answer repeats) and counts applies.
class ScriptedStage : public Stage {
 public:
  ScriptedStage(std::string name, std::vector<Check> answers,
                std::vector<std::string>* log, Result<void> apply_result = {})
      : name_(std::move(name)),
        answers_(std::move(answers)),
        log_(log),
        apply_result_(std::move(apply_result)) {}
  std::string_view name() const override { return name_; }
  std::string_view layer() const override { return name_; }
  std::string inputs(Context&) const override { return name_ + "-inputs"; }
  Check check(Context&) override {
    log_->push_back("check " + name_);
    Check c = answers_.front();
    if (answers_.size() > 1) answers_.erase(answers_.begin());
    return c;
  }
  Result<void> apply(Context&, const Check&) override {
    log_->push_back("apply " + name_);
    return apply_result_;
  }

 private:
  std::string name_;
  std::vector<Check> answers_;
  std::vector<std::string>* log_;
  Result<void> apply_result_;
};

struct Harness {
  TempDir dir;
  std::unique_ptr<FileSystem> fs = make_rooted_file_system(dir.path());
  std::unique_ptr<ProcessRunner> proc = make_posix_process_runner();
  FakeClock clock;
  uid_t uid = 0;
  std::vector<std::string> log;
  std::ostringstream out, err;
  Options opts;

  ExitCode run(RunMode mode, StageList stages) {
    ComposedHost host(*fs, *proc, clock, uid, "gpu-1");
    Reporter report(out, err, /*json=*/true, /*color=*/false);
    return run_stages(host, opts, mode, std::move(stages), report);
  }
  Journal journal() { return load_journal(*fs, opts.state_dir).journal; }
};

Check ok() { return satisfied("x.ok", "fine"); }
Check need() { return needed("x.need", "missing", "create it"); }
Check stop() { return blocked("x.blocked", "broken", "repair it"); }

}  // namespace

TEST_CASE("install applies what is needed, then confirms with a fresh check",
          "[runner]") {
  Harness h;
  StageList s;
  s.push_back(
      std::make_unique<ScriptedStage>("a", std::vector<Check>{ok()}, &h.log));
  s.push_back(std::make_unique<ScriptedStage>(
      "b", std::vector<Check>{need(), ok()}, &h.log));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kOk);
  CHECK(h.log ==
        std::vector<std::string>{"check a", "check b", "apply b", "check b"});
  Journal j = h.journal();
  CHECK(j.stages.at("a").result == "satisfied");
  CHECK(j.stages.at("b").result == "applied");
  CHECK(j.stages.at("b").inputs_digest == sha256_hex("b-inputs"));
  REQUIRE(j.last_run);
  CHECK(j.last_run->exit_code == 0);
  CHECK_FALSE(j.last_run->finished_at.empty());
}

TEST_CASE("install stops at the lowest blocked layer and names it",
          "[runner]") {
  Harness h;
  StageList s;
  s.push_back(std::make_unique<ScriptedStage>("low", std::vector<Check>{stop()},
                                              &h.log));
  s.push_back(std::make_unique<ScriptedStage>(
      "high", std::vector<Check>{need()}, &h.log));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kBlocked);
  CHECK(h.log == std::vector<std::string>{"check low"});
  CHECK_THAT(h.err.str(), Catch::Contains("[ERROR low] broken"));
  CHECK_THAT(h.err.str(), Catch::Contains("fix: repair it"));
  CHECK_THAT(h.out.str(),
             Catch::Contains(R"("stage":"high","status":"skipped")"));
  CHECK_THAT(h.out.str(), Catch::Contains(R"("event":"result")"));
}

TEST_CASE("an apply that does not take is a failure, not a success",
          "[runner]") {
  Harness h;
  StageList s;
  s.push_back(
      std::make_unique<ScriptedStage>("b", std::vector<Check>{need()}, &h.log));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kBlocked);
  CHECK(h.journal().stages.at("b").result == "failed");
  CHECK_THAT(h.err.str(), Catch::Contains("still not in place after applying"));
}

TEST_CASE("an apply error keeps its exit class", "[runner]") {
  Harness h;
  StageList s;
  s.push_back(std::make_unique<ScriptedStage>(
      "b", std::vector<Check>{need()}, &h.log,
      Error{ExitCode::kTimeout, "b", "waited too long", "wait longer"}));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kTimeout);
  CHECK(h.journal().stages.at("b").result == "failed");
}

TEST_CASE("plan and --dry-run change nothing and write no journal",
          "[runner]") {
  Harness h;
  SECTION("plan") {
    StageList s;
    s.push_back(std::make_unique<ScriptedStage>("b", std::vector<Check>{need()},
                                                &h.log));
    CHECK(h.run(RunMode::kPlan, std::move(s)) == ExitCode::kOk);
  }
  SECTION("install --dry-run") {
    h.opts.dry_run = true;
    StageList s;
    s.push_back(std::make_unique<ScriptedStage>("b", std::vector<Check>{need()},
                                                &h.log));
    CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kOk);
  }
  CHECK(h.log == std::vector<std::string>{"check b"});
  CHECK_THAT(h.out.str(), Catch::Contains(R"("status":"would-apply")"));
  CHECK(gpunode::test::snapshot_tree(h.dir.path()).empty());
}

TEST_CASE("status checks every layer even past a blocked one", "[runner]") {
  Harness h;
  StageList s;
  s.push_back(std::make_unique<ScriptedStage>("low", std::vector<Check>{stop()},
                                              &h.log));
  s.push_back(std::make_unique<ScriptedStage>("high", std::vector<Check>{ok()},
                                              &h.log));
  CHECK(h.run(RunMode::kStatus, std::move(s)) == ExitCode::kBlocked);
  CHECK(h.log == std::vector<std::string>{"check low", "check high"});
  CHECK(gpunode::test::snapshot_tree(h.dir.path()).empty());
}

TEST_CASE("install refuses to run as a normal user, before touching anything",
          "[runner]") {
  Harness h;
  h.uid = 1000;
  StageList s;
  s.push_back(
      std::make_unique<ScriptedStage>("b", std::vector<Check>{need()}, &h.log));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kCannotRun);
  CHECK(h.log.empty());
  CHECK_THAT(h.err.str(), Catch::Contains("must run as root"));
  CHECK(gpunode::test::snapshot_tree(h.dir.path()).empty());
}

TEST_CASE("a second run while one holds the lock exits 5 naming the holder",
          "[runner]") {
  Harness h;
  REQUIRE(h.fs->create_directories(h.opts.state_dir));
  auto held = RunLock::acquire(*h.fs, h.opts.state_dir);
  REQUIRE(held);
  StageList s;
  s.push_back(
      std::make_unique<ScriptedStage>("b", std::vector<Check>{need()}, &h.log));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kCannotRun);
  CHECK(h.log.empty());
  // The holder (this process, on another open of the file), from the
  // kernel's lock table: nothing was written to the lock file.
  CHECK_THAT(h.err.str(),
             Catch::Contains("(pid " + std::to_string(::getpid()) + ": "));
  CHECK(h.fs->read_file(h.opts.state_dir + "/lock", 100).value().empty());
}

TEST_CASE(
    "a run interrupted mid-apply is named by the next run, which checks again",
    "[runner]") {
  Harness h;
  Journal crashed;
  crashed.stages["b"] = {"started", "d", "2026-11-29T10:00:00Z", "",
                         "create it"};
  crashed.last_run = RunRecord{"install", "2026-11-29T10:00:00Z", "", -1};
  REQUIRE(save_journal(*h.fs, h.opts.state_dir, crashed));
  StageList s;
  s.push_back(
      std::make_unique<ScriptedStage>("b", std::vector<Check>{ok()}, &h.log));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kOk);
  CHECK_THAT(h.err.str(), Catch::Contains("did not finish"));
  CHECK_THAT(h.err.str(), Catch::Contains("interrupted while applying"));
  CHECK(h.journal().stages.at("b").result == "satisfied");
}

TEST_CASE("a corrupt journal is reported and the run goes on", "[runner]") {
  Harness h;
  gpunode::test::write_text(h.dir.path() + h.opts.state_dir + "/journal.json",
                            "{not json");
  StageList s;
  s.push_back(
      std::make_unique<ScriptedStage>("a", std::vector<Check>{ok()}, &h.log));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kOk);
  CHECK_THAT(h.err.str(), Catch::Contains("starting without history"));
  CHECK(h.journal().stages.at("a").result == "satisfied");
}

TEST_CASE(
    "a journal from a newer gpunode is kept aside before install writes its "
    "own, and status and plan leave it alone",
    "[runner]") {
  Harness h;
  const std::string state = h.dir.path() + h.opts.state_dir;
  const std::string newer =
      R"({"version": 2, "stages": {"a": {"result": "applied"}}, "x": 1})";
  gpunode::test::write_text(state + "/journal.json", newer);
  auto one_stage = [&h] {
    StageList s;
    s.push_back(
        std::make_unique<ScriptedStage>("a", std::vector<Check>{ok()}, &h.log));
    return s;
  };
  for (const RunMode mode : {RunMode::kStatus, RunMode::kPlan}) {
    const auto before = gpunode::test::snapshot_tree(h.dir.path());
    CHECK(h.run(mode, one_stage()) == ExitCode::kOk);
    CHECK(gpunode::test::snapshot_tree(h.dir.path()) == before);
  }
  CHECK_THAT(h.err.str(), Catch::Contains("was written by a newer gpunode "
                                          "(journal version 2; this one reads "
                                          "1)"));
  CHECK(h.run(RunMode::kInstall, one_stage()) == ExitCode::kOk);
  CHECK_THAT(h.err.str(),
             Catch::Contains("kept the newer gpunode's journal as " +
                             h.opts.state_dir + "/journal.json.newer-v2"));
  CHECK(gpunode::test::read_text(state + "/journal.json.newer-v2") == newer);
  CHECK(h.journal().stages.at("a").result == "satisfied");
  // Another newer journal later: kept beside the first, never over it.
  gpunode::test::write_text(state + "/journal.json", newer + " ");
  CHECK(h.run(RunMode::kInstall, one_stage()) == ExitCode::kOk);
  CHECK(gpunode::test::read_text(state + "/journal.json.newer-v2") == newer);
  CHECK(gpunode::test::read_text(state + "/journal.json.newer-v2.1") ==
        newer + " ");
  // The warning names the copy actually written, not the taken one.
  CHECK_THAT(h.err.str(),
             Catch::Contains("keeps it aside as " + h.opts.state_dir +
                             "/journal.json.newer-v2.1 before"));
}

TEST_CASE(
    "a journal version past what an integer holds is newer: kept aside, not "
    "overwritten as 'no version'",
    "[runner]") {
  for (const auto& [version, kept] :
       std::vector<std::pair<std::string, std::string>>{
           {"18446744073709551615", "18446744073709551615"},
           {"99999999999999999999", "100000000000000000000"}}) {
    INFO(version);
    Harness h;
    const std::string state = h.dir.path() + h.opts.state_dir;
    const std::string newer = R"({"version": )" + version + "}";
    gpunode::test::write_text(state + "/journal.json", newer);
    StageList s;
    s.push_back(
        std::make_unique<ScriptedStage>("a", std::vector<Check>{ok()}, &h.log));
    CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kOk);
    CHECK_THAT(h.err.str(), Catch::Contains("journal version " + kept));
    CHECK(gpunode::test::read_text(state + "/journal.json.newer-v" + kept) ==
          newer);
  }
}

TEST_CASE(
    "a run whose stages are all outside its scope is refused (exit 2), "
    "before anything is written",
    "[runner]") {
  Harness h;
  h.opts.scope = Scope::kCluster;
  StageList s;
  s.push_back(std::make_unique<ScriptedStage>(
      "driver", std::vector<Check>{ok()}, &h.log));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kUsage);
  CHECK(h.log.empty());
  CHECK_THAT(h.err.str(),
             Catch::Contains("[ERROR usage] nothing to check: the stages "
                             "chosen (driver) are not part of --scope cluster "
                             "(k3s none)"));
  CHECK_THAT(h.out.str(), Catch::Contains(R"("exit_code":2)"));
  CHECK(gpunode::test::snapshot_tree(h.dir.path()).empty());
}

TEST_CASE("status shows history and notices changed inputs", "[runner]") {
  Harness h;
  Journal j;
  j.stages["a"] = {"applied", sha256_hex("something else"),
                   "2026-11-29T10:00:00Z", "2026-11-29T10:00:05Z", "done"};
  REQUIRE(save_journal(*h.fs, h.opts.state_dir, j));
  StageList s;
  s.push_back(
      std::make_unique<ScriptedStage>("a", std::vector<Check>{ok()}, &h.log));
  CHECK(h.run(RunMode::kStatus, std::move(s)) == ExitCode::kOk);
  CHECK_THAT(h.err.str(), Catch::Contains("applied at 2026-11-29T10:00:05Z"));
  CHECK_THAT(h.err.str(), Catch::Contains("inputs have changed since"));
}

TEST_CASE("a run past its deadline stops with exit 3", "[runner]") {
  Harness h;
  h.opts.timeout = std::chrono::milliseconds(1000);
  // A stage whose check takes all the time there is.
  class Slow : public ScriptedStage {
   public:
    Slow(FakeClock& c, std::vector<std::string>* log)
        : ScriptedStage("slow", {satisfied("x", "ok")}, log), clock_(c) {}
    Check check(Context& ctx) override {
      clock_.advance(std::chrono::seconds(2));
      return ScriptedStage::check(ctx);
    }
    FakeClock& clock_;
  };
  StageList s;
  s.push_back(std::make_unique<Slow>(h.clock, &h.log));
  s.push_back(std::make_unique<ScriptedStage>("next", std::vector<Check>{ok()},
                                              &h.log));
  CHECK(h.run(RunMode::kInstall, std::move(s)) == ExitCode::kTimeout);
  CHECK(h.log == std::vector<std::string>{"check slow"});
}

TEST_CASE(
    "status: the cluster connection is said once, as the cluster layer, and "
    "the last line names it",
    "[runner]") {
  Harness h;
  const Check down =
      blocked(kClusterConnectionCode,
              "/etc/rancher/k3s/k3s.yaml does not exist", "start k3s");
  StageList s;
  s.push_back(
      std::make_unique<ScriptedStage>("a", std::vector<Check>{ok()}, &h.log));
  s.push_back(
      std::make_unique<ScriptedStage>("rc", std::vector<Check>{down}, &h.log));
  s.push_back(
      std::make_unique<ScriptedStage>("pl", std::vector<Check>{down}, &h.log));
  CHECK(h.run(RunMode::kStatus, std::move(s)) == ExitCode::kBlocked);
  const std::string err = h.err.str();
  INFO(err);
  std::size_t errors = 0;
  for (auto at = err.find("[ERROR "); at != std::string::npos;
       at = err.find("[ERROR ", at + 1))
    ++errors;
  CHECK(errors == 1);
  CHECK_THAT(err, Catch::Contains("[ERROR cluster] /etc/rancher/k3s/k3s.yaml "
                                  "does not exist"));
  CHECK_THAT(err, Catch::Contains("status: blocked - cluster: /etc/rancher/"
                                  "k3s/k3s.yaml does not exist"));
  CHECK_THAT(h.out.str(), Catch::Contains("\"layer\":\"cluster\""));
}

// status over stages answering `checks` once each; its stderr.
std::string status_of(
    const std::vector<std::pair<std::string, Check>>& checks) {
  Harness h;
  StageList s;
  for (const auto& [name, c] : checks)
    s.push_back(
        std::make_unique<ScriptedStage>(name, std::vector<Check>{c}, &h.log));
  CHECK(h.run(RunMode::kStatus, std::move(s)) == ExitCode::kBlocked);
  return h.err.str();
}

TEST_CASE(
    "status: the last line names a blocked layer, else the cause the checks "
    "found, before a lower layer's lesser change",
    "[runner]") {
  Check waiting = needed("w.wait", "advertises 0, not yet 1", "wait");
  waiting.cause = "plugin: pod runs without runtimeClassName";
  CHECK_THAT(status_of({{"image", need()}, {"allocatable", waiting}}),
             Catch::Contains("status: blocked - plugin: pod runs without "
                             "runtimeClassName"));
  CHECK_THAT(
      status_of(
          {{"image", need()}, {"plugin", stop()}, {"allocatable", waiting}}),
      Catch::Contains("status: blocked - plugin: broken"));
  CHECK_THAT(status_of({{"image", need()}}),
             Catch::Contains("status: blocked - image: missing"));
}
