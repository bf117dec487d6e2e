// The stage runner. install: check every stage, apply what is needed, stop at
// the first blocked layer (everything above it depends on it). plan and
// --dry-run: check and say what would change, write nothing. status: check
// every layer, read-only, and show the journal's history beside each.
#include "gpunode/runner.hpp"

#include <unistd.h>

#include <map>
#include <optional>

#include "evidence/evidence_collect.hpp"
#include "evidence/evidence_key.hpp"
#include "gpunode/crash_point.hpp"
#include "gpunode/digest.hpp"
#include "gpunode/interrupt.hpp"
#include "gpunode/journal.hpp"
#include "gpunode/run_lock.hpp"
#include "gpunode/state_dir.hpp"
#include "plan_totals.hpp"
#include "plugin/manifest_texts.hpp"
#include "run/cluster_facts.hpp"
#include "run/host_role.hpp"

namespace gpunode {

std::string command_name(RunMode mode, bool dry_run) {
  switch (mode) {
    case RunMode::kInstall:
      return dry_run ? "install --dry-run" : "install";
    case RunMode::kPlan:
      return "plan";
    case RunMode::kStatus:
      return "status";
    case RunMode::kProve:
      return "prove";
  }
  return "install";
}

namespace {

// When several things fail, report the most specific class: a usage or
// integrity problem says more than "blocked".
ExitCode worse(ExitCode a, ExitCode b) {
  auto rank = [](ExitCode c) {
    switch (c) {
      case ExitCode::kOk:
        return 0;
      case ExitCode::kBlocked:
        return 1;
      case ExitCode::kTimeout:
        return 2;
      case ExitCode::kUsage:
        return 3;
      case ExitCode::kIntegrity:
        return 4;
      case ExitCode::kCannotRun:
        return 5;
      case ExitCode::kInterrupted:
        return 6;  // whatever else happened, the run was stopped
    }
    return 0;
  };
  return rank(b) > rank(a) ? b : a;
}

// Why a stage is not in this run's scope, for the skipped line.
std::string scope_reason(Scope scope) {
  switch (scope) {
    case Scope::kNode:
      return " (it needs admin credentials: a run of both parts does it)";
    case Scope::kCluster:
      return " (each GPU node's own run does this host's layers)";
    case Scope::kBoth:
      return "";
  }
  return "";
}

std::string history_text(const StageRecord& rec,
                         const std::string& digest_now) {
  std::string text =
      rec.result == "started"
          ? "interrupted while applying (started " + rec.started_at + ")"
          : rec.result + " at " +
                (rec.finished_at.empty() ? rec.started_at : rec.finished_at);
  if (!rec.inputs_digest.empty() && rec.inputs_digest != digest_now) {
    text += "; inputs have changed since";
  }
  return text;
}

class Run {
 public:
  Run(Host& host, const Options& opts, RunMode mode, Reporter& report,
      KnownFacts known)
      : host_(host),
        opts_(opts),
        mode_(mode),
        report_(report),
        mutating_(run_mode_changes(mode, opts.dry_run)),
        command_(command_name(mode, opts.dry_run)),
        // Only install writes to the cluster: every other command's writes
        // (plan's dry run) go out with dryRun=All.
        ctx_(host, opts, host.clock().steady_now() + opts.timeout,
             std::move(known),
             run_mode_changes(mode, opts.dry_run) ? ClusterWrites::kReal
                                                  : ClusterWrites::kDryRun) {}

  Context& context() { return ctx_; }

  ExitCode execute(StageList stages) {
    if (auto e = scope_mismatch(stages)) {
      report_.error(*e);
      return finish(e->exit, e->message);
    }
    if (mutating_) {
      if (auto r = begin(); !r)
        return finish(r.error().exit, r.error().message);
    } else {
      journal_ = load_and_warn();
    }
    // A run that is not a single node's whole job says which part it does.
    if (ctx_.scope() != Scope::kBoth) {
      report_.info(
          "scope",
          std::string(ctx_.scope() == Scope::kNode ? "the node part"
                                                   : "the cluster part") +
              " (--scope " + scope_name(ctx_.scope()) + ", k3s " +
              host_role_name(ctx_.host_role()) + "), as " + ctx_.kubeconfig());
    }
    std::string blocked_at;
    std::size_t applied = 0;
    for (auto& stage : stages) {
      const std::string name(stage->name());
      if (mutating_) crash_point("check:" + name);
      if (interrupted() && exit_ != ExitCode::kInterrupted && mutating_) {
        stop_interrupted(name);
        blocked_at = name;
      }
      if (!stage->runs_in(ctx_.scope())) {
        report_.skipped(name, std::string("not part of --scope ") +
                                  scope_name(ctx_.scope()) +
                                  scope_reason(ctx_.scope()));
        outcomes_.push_back({name, "skipped"});
        continue;
      }
      if (!blocked_at.empty()) {
        report_.skipped(name, "not checked: the lower layer '" + blocked_at +
                                  "' is not ready");
        outcomes_.push_back({name, "skipped"});
        continue;
      }
      if (ctx_.time_left().count() == 0) {
        Error e{ExitCode::kTimeout, name,
                "the --timeout of " +
                    std::to_string(opts_.timeout.count() / 1000) +
                    "s ran out before this stage",
                "rerun with a longer --timeout"};
        report_.error(e);
        outcomes_.push_back({name, "timed-out"});
        exit_ = worse(exit_, ExitCode::kTimeout);
        blocked_at = name;
        continue;
      }
      const std::string digest = sha256_hex(stage->inputs(ctx_));
      const std::string started = iso8601_utc(host_.clock().now());
      Check c = stage->check(ctx_);
      if (previewing() && c.status == CheckStatus::kNeeded &&
          stage->writes_only_cluster_objects(ctx_.scope()))
        c = dry_run(*stage, std::move(c));
      for (const auto& [layer, text] : ctx_.take_warnings())
        report_.warning(layer, text);
      if (previewing()) totals_.add(c);

      // status goes on past a blocked layer; several layers above it often
      // share its cause (no kubeconfig, API down): say it once. The cluster
      // connection is its own layer, not the stage that first needed it.
      const bool connection =
          c.status == CheckStatus::kBlocked && c.code == kClusterConnectionCode;
      auto same = c.status == CheckStatus::kBlocked ? reported_.find(c.summary)
                                                    : reported_.end();
      if (connection) {
        if (!connection_reported_)
          report_.error(Error{c.exit, "cluster", c.summary, c.fix});
        connection_reported_ = true;
        report_.skipped(name,
                        "not checked: it needs the cluster, which cannot be "
                        "reached (the cluster error above)");
      } else if (same != reported_.end()) {
        report_.skipped(
            name, "blocked by the same problem as [" + same->second + "]");
      } else if (c.status == CheckStatus::kNeeded && !mutating_) {
        report_.would_apply(*stage, c);
      } else {
        if (c.status == CheckStatus::kBlocked)
          reported_.emplace(c.summary, name);
        report_.check(*stage, c);
      }
      if (mode_ == RunMode::kStatus) show_history(name, digest);

      if (c.status == CheckStatus::kSatisfied) {
        record(name, "satisfied", digest, started, c.summary);
        outcomes_.push_back({name, "satisfied"});
        continue;
      }
      if (c.status == CheckStatus::kBlocked) {
        record(name, "blocked", digest, started, c.summary);
        outcomes_.push_back({name, "blocked"});
        exit_ = worse(exit_, c.exit);
        const std::string problem =
            (connection ? "cluster" : name) + ": " + c.summary;
        if (first_problem_.empty()) first_problem_ = problem;
        if (first_blocked_.empty()) first_blocked_ = problem;
        if (mode_ != RunMode::kStatus)
          blocked_at = connection ? "cluster" : name;
        continue;
      }
      // Needed.
      if (!mutating_) {
        outcomes_.push_back({name, "would-apply"});
        if (mode_ == RunMode::kStatus) {
          exit_ = worse(exit_, ExitCode::kBlocked);
          if (first_problem_.empty()) first_problem_ = name + ": " + c.summary;
          if (first_cause_.empty()) first_cause_ = c.cause;
        }
        continue;
      }
      if (!apply(*stage, c, digest, started)) {
        blocked_at = name;
        continue;
      }
      ++applied;
    }

    std::string summary;
    if (exit_ == ExitCode::kOk) {
      // Stages outside the scope were not checked: they are counted apart
      // (the independent try of issue 26 read "9 checked" for 5).
      std::size_t skipped = 0;
      for (const auto& o : outcomes_) skipped += o.status == "skipped";
      summary =
          std::to_string(outcomes_.size() - skipped) + " stage(s) checked";
      if (applied > 0) summary += ", " + std::to_string(applied) + " applied";
      if (skipped > 0) summary += ", " + std::to_string(skipped) + " skipped";
      if (!run_mode_changes(mode_, opts_.dry_run)) {
        std::size_t would = 0;
        for (const auto& o : outcomes_) would += o.status == "would-apply";
        if (would > 0)
          summary += ", " + std::to_string(would) + " would change";
      }
    } else {
      // status: a blocked layer first, then what the cluster shows breaking
      // the node (a DaemonSet without runtimeClassName), and only then the
      // lowest layer that merely differs (an image not pinned).
      summary = mode_ != RunMode::kStatus ? first_problem_
                : !first_blocked_.empty() ? first_blocked_
                : !first_cause_.empty()   ? first_cause_
                                          : first_problem_;
    }
    return finish(exit_, summary);
  }

 private:
  // A flag the scope never uses, or stages it does not run, would make a
  // run that did not do what was asked, and yet ended "done": refused
  // before anything is read or written.
  std::optional<Error> scope_mismatch(const StageList& stages) {
    const Scope scope = ctx_.scope();
    const std::string part = "--scope " + std::string(scope_name(scope)) +
                             " (k3s " + host_role_name(ctx_.host_role()) + ")";
    if (scope == Scope::kNode) {
      for (const auto& [given, flag] :
           {std::pair{opts_.all_nodes, "--all-nodes"},
            std::pair{opts_.replace_existing, "--replace-existing"}}) {
        if (!given) continue;
        return Error{ExitCode::kUsage, "usage",
                     std::string(flag) + ": not used by " + part +
                         ": only the cluster part changes the device plugin "
                         "DaemonSet",
                     std::string("drop ") + flag +
                         ", or give it to the cluster part, where an admin "
                         "kubeconfig is: gpunode install --scope cluster " +
                         flag};
      }
    }
    // --smoke on the node part alone readies this node to be proven (the
    // image stage imports the bundle's CUDA sample); the proof Pods are
    // the cluster part's, made with an admin identity.
    std::string names;
    bool actions_only = true;
    for (const auto& stage : stages) {
      if (stage->runs_in(scope)) return std::nullopt;
      names += (names.empty() ? "" : ", ") + std::string(stage->name());
      actions_only &= stage->part() == StagePart::kClusterAction;
    }
    // The scopes that do run them (regression, independent try of issue
    // 26: `--only smoke` was sent to --scope cluster, which skips it too).
    std::string scopes;
    for (Scope s : {Scope::kNode, Scope::kCluster, Scope::kBoth}) {
      if (s == scope) continue;
      bool runs = false;
      for (const auto& stage : stages) runs |= stage->runs_in(s);
      if (runs)
        scopes += std::string(scopes.empty() ? "" : " or ") + "--scope " +
                  scope_name(s);
    }
    return Error{
        ExitCode::kUsage, "usage",
        "nothing to check: the stages chosen (" + names + ") are not part of " +
            part +
            (actions_only ? std::string(" (the proof Pods are the cluster "
                                        "part's)")
                          : scope_reason(scope)),
        "run them with " + scopes +
            ", or choose stages of this part with --only"};
  }

  // plan and install --dry-run: say what install would change, and how much.
  bool previewing() const { return !mutating_ && mode_ != RunMode::kStatus; }

  // A needed stage that writes only API objects runs its apply() against
  // this run's cluster, whose writes are all dryRun=All: the API server
  // validates and admits them as it would for install, and stores nothing.
  Check dry_run(Stage& stage, Check c) {
    auto r = stage.apply(ctx_, c);
    if (r) {
      c.facts["dry_run"] = "accepted";
      c.details.push_back(
          "the API server's dry run (dryRun=All) accepts these writes");
      return c;
    }
    const Error& e = r.error();
    // 400/409/422 (validation), 403 (admission, RBAC): the server looked at
    // what install would write and said no. Anything else is the
    // connection's.
    if (e.status < 400 || e.status >= 500 || e.status == 404) {
      Check b =
          cluster_blocked(ctx_, e, std::string(stage.name()) + ".dry-run");
      b.facts = c.facts;
      return b;
    }
    Check b =
        blocked(std::string(stage.name()) + ".dry-run-refused",
                "the API server refuses what install would write: " + e.message,
                e.status == 403 ? e.fix
                                : "install would fail the same way: fix "
                                  "the manifest (" +
                                      manifests_origin() +
                                      ") or the cluster policy that "
                                      "rejects it",
                ExitCode::kBlocked);
    b.facts = c.facts;
    b.facts["dry_run"] = "refused";
    b.details = c.details;
    return b;
  }

  std::string manifests_origin() {
    auto texts = ctx_.manifests();
    return texts ? (*texts)->origin : std::string("built-in");
  }

  LoadedJournal load_and_warn() {
    LoadedJournal loaded = load_journal(host_.fs(), opts_.state_dir);
    if (loaded.warning) report_.warning("journal", *loaded.warning);
    return loaded;
  }

  Result<void> begin() {
    if (host_.effective_uid() != 0) {
      Error e{
          ExitCode::kCannotRun, "preflight",
          "install changes the host (k3s, containerd, the cluster) and must "
          "run as root",
          "sudo gpunode install ...   (or see what it would do: gpunode plan)"};
      report_.error(e);
      return e;
    }
    if (auto r = prepare_state_dir(host_.fs(), opts_.state_dir); !r) {
      report_.error(r.error());
      return r.error();
    }
    auto lock = RunLock::acquire(host_.fs(), opts_.state_dir);
    if (!lock) {
      report_.error(lock.error());
      return lock.error();
    }
    lock_ = std::move(*lock);
    // Read the journal only under the lock: another run may just have written
    // it.
    journal_ = load_and_warn();
    if (!journal_.newer_version.empty()) {
      auto kept = keep_newer_journal(host_.fs(), opts_.state_dir, journal_);
      if (!kept) {
        report_.error(kept.error());
        return kept.error();
      }
      report_.info("journal", "kept the newer gpunode's journal as " + *kept);
    }
    Journal& j = journal_.journal;
    if (j.last_run && j.last_run->finished_at.empty()) {
      report_.info("journal",
                   "the previous run (" + j.last_run->command + ", started " +
                       j.last_run->started_at +
                       ") did not finish; every layer is checked again");
    }
    if (j.last_run &&
        j.last_run->exit_code == static_cast<int>(ExitCode::kInterrupted)) {
      report_.info("journal", "the previous run (" + j.last_run->command +
                                  ", started " + j.last_run->started_at +
                                  ") was interrupted; going on from there");
    }
    for (const auto& [name, rec] : j.stages) {
      if (rec.result == "started" || rec.result == "interrupted") {
        report_.warning(name, "was interrupted while applying (started " +
                                  rec.started_at + "); checking it again");
      }
    }
    // A journal read cleanly is kept as it was until this run has something
    // to record: the first apply saves (with this run's start, so a crash
    // from there on is seen), and finish() saves only when the outcome
    // differs from the file's. A rerun that changes nothing writes nothing.
    // Without such a journal the write comes now, so that a state dir that
    // cannot take it is exit 5 before anything changes.
    if (!journal_.warning && j.last_run) on_disk_ = j;
    j.last_run = RunRecord{command_, iso8601_utc(host_.clock().now()), "", -1};
    if (!on_disk_ && !save()) {
      // save() named the cause; finish() must not try (and report) again.
      j.last_run.reset();
      const std::string path = journal_path(opts_.state_dir);
      return Error{ExitCode::kCannotRun, "journal",
                   "cannot write the journal " + path,
                   "make " + path +
                       " a writable file or remove it (it is history only; "
                       "every run checks the host again)"};
    }
    return {};
  }

  // Reports its own failure; callers only decide whether to go on.
  bool save() {
    saved_ = true;
    auto r = save_journal(host_.fs(), opts_.state_dir, journal_.journal);
    if (!r) report_.error(r.error());
    return r.ok();
  }

  void record(const std::string& name, const std::string& result,
              const std::string& digest, const std::string& started,
              const std::string& message) {
    if (!mutating_) return;
    journal_.journal.stages[name] = StageRecord{
        result, digest, started,
        result == "started" ? "" : iso8601_utc(host_.clock().now()), message};
  }

  void show_history(const std::string& name, const std::string& digest) {
    auto it = journal_.journal.stages.find(name);
    if (it != journal_.journal.stages.end()) {
      report_.history(name, history_text(it->second, digest));
    }
  }

  // Journals "started" before touching anything, so a crash mid-apply is
  // visible to the next run; then applies and checks again: apply() saying
  // it worked is not proof, the check is.
  bool apply(Stage& stage, const Check& c, const std::string& digest,
             const std::string& started) {
    const std::string name(stage.name());
    record(name, "started", digest, started, c.action);
    if (!save()) {
      exit_ = worse(exit_, ExitCode::kCannotRun);
      outcomes_.push_back({name, "failed"});
      return false;
    }
    crash_point("apply:" + name);
    report_.applying(stage, c.action);
    auto r = stage.apply(ctx_, c);
    if (!r && (r.error().exit == ExitCode::kInterrupted || interrupted())) {
      // The stage finished or undid its write in flight (see its apply);
      // the journal says where the run stopped. A stage that says how its
      // write ended (the toolkit's package transaction) is quoted as is.
      report_.error(r.error().exit == ExitCode::kInterrupted &&
                            r.error().layer == name
                        ? r.error()
                        : interrupted_error(name));
      record(name, "interrupted", digest, started, r.error().message);
      outcomes_.push_back({name, "interrupted"});
      exit_ = ExitCode::kInterrupted;
      first_problem_ = name + ": interrupted by " + signal_name(interrupted());
      (void)save();
      return false;
    }
    if (!r) {
      report_.error(r.error());
      record(name, "failed", digest, started, r.error().message);
      outcomes_.push_back({name, "failed"});
      exit_ = worse(exit_, r.error().exit);
      if (first_problem_.empty())
        first_problem_ = name + ": " + r.error().message;
      (void)save();  // a failure is reported; the stage's error matters more
      return false;
    }
    crash_point("applied:" + name);
    Check after = stage.check(ctx_);
    if (after.status != CheckStatus::kSatisfied) {
      if (after.status == CheckStatus::kNeeded) {
        after = blocked(
            after.code, "still not in place after applying: " + after.summary,
            "see the messages above; rerun gpunode install once it is fixed");
      }
      report_.check(stage, after);
      record(name, "failed", digest, started, after.summary);
      outcomes_.push_back({name, "failed"});
      exit_ = worse(
          exit_, after.exit == ExitCode::kOk ? ExitCode::kBlocked : after.exit);
      if (first_problem_.empty()) first_problem_ = name + ": " + after.summary;
      (void)save();  // a failure is reported; the stage's error matters more
      return false;
    }
    report_.applied(stage, after);
    record(name, "applied", digest, started, after.summary);
    outcomes_.push_back({name, "applied"});
    (void)save();
    crash_point("recorded:" + name);
    return true;
  }

  // A signal arrived between stages: nothing is in flight.
  void stop_interrupted(const std::string& next) {
    report_.error(interrupted_error(next));
    exit_ = ExitCode::kInterrupted;
    first_problem_ = "interrupted by " + signal_name(interrupted()) +
                     " before stage " + next;
  }

  ExitCode finish(ExitCode code, const std::string& summary) {
    if (mutating_ && lock_ && journal_.journal.last_run) {
      journal_.journal.last_run->finished_at = iso8601_utc(host_.clock().now());
      journal_.journal.last_run->exit_code = static_cast<int>(code);
      if (saved_ || !on_disk_ || !nothing_new(*on_disk_, journal_.journal))
        (void)save();
    }
    nlohmann::json extra = ctx_.run_identity();
    if (previewing() && !totals_.empty()) {
      report_.info("plan", totals_.human());
      extra["plan"] = totals_.to_json();
    }
    // What the run planned for this node and each GPU node's slots, as far
    // as its stages got (plan/node_plan.hpp).
    if (previewing()) {
      const nlohmann::json planned = ctx_.plan_so_far();
      for (const auto& [key, value] : planned.items())
        extra["plan"][key] = value;
    }
    record_evidence(code, extra);
    report_.result(command_, code, summary, outcomes_, extra);
    return code;
  }

  // After an install of this node that ended well: its signed evidence
  // record (evidence/evidence_collect.hpp), once the labels stage has made
  // its key. A record that cannot be written is a warning, not a failure
  // of the install.
  void record_evidence(ExitCode code, nlohmann::json& extra) {
    if (!mutating_ || mode_ != RunMode::kInstall || code != ExitCode::kOk ||
        !ctx_.carries_node_part())
      return;
    auto key = read_evidence_public(host_.fs(), opts_.state_dir);
    if (!key || !*key) return;
    // A rerun that changed nothing writes nothing (README, "State"): a
    // record is made when a stage applied, or when there is none yet.
    bool applied = false;
    for (const auto& o : outcomes_) applied |= o.status == "applied";
    if (!applied && !host_.fs().list_dir(opts_.state_dir + "/evidence").empty())
      return;
    auto written = write_evidence(host_, opts_, ctx_.shared_cluster());
    if (!written) {
      report_.warning(
          "evidence",
          "no evidence record written: " + written.error().message +
              (written.error().fix.empty() ? ""
                                           : " (" + written.error().fix + ")"));
      return;
    }
    report_.info("evidence", "signed record " + written->path + " (" +
                                 std::to_string(written->bytes) +
                                 " bytes, key " + written->fingerprint +
                                 "); gpunode evidence verify checks it");
    extra["evidence"] = written->path;
  }

  Host& host_;
  const Options& opts_;
  RunMode mode_;
  Reporter& report_;
  bool mutating_;
  std::string command_;
  Context ctx_;
  PlanTotals totals_;
  std::unique_ptr<RunLock> lock_;
  LoadedJournal journal_;
  // journal.json as this run found it, when it read cleanly; unset once
  // there is nothing to compare against (begin()).
  std::optional<Journal> on_disk_;
  bool saved_ = false;  // this run wrote journal.json (or tried to)
  std::vector<StageOutcome> outcomes_;
  ExitCode exit_ = ExitCode::kOk;
  std::string first_problem_;
  std::string first_blocked_;  // the first blocked check's "stage: summary"
  std::string first_cause_;    // the first Check::cause found (status)
  std::map<std::string, std::string>
      reported_;                      // blocked summary -> first stage
  bool connection_reported_ = false;  // [ERROR cluster] said once
};

}  // namespace

ExitCode run_stages(Host& host, const Options& opts, RunMode mode,
                    StageList stages, Reporter& report, Progress& progress,
                    KnownFacts known) {
  Run run(host, opts, mode, report, std::move(known));
  run.context().progress = &progress;
  run.context().notice = [&report](std::string_view layer,
                                   const std::string& text) {
    report.warning(layer, text);
  };
  return run.execute(std::move(stages));
}

}  // namespace gpunode
