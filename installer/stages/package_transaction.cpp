#include "stages/package_transaction.hpp"

#include "gpunode/interrupt.hpp"

namespace gpunode {
namespace {

constexpr std::chrono::milliseconds kLockPoll{200};

// The first of the package manager's locks someone else holds.
std::optional<LockHolder> held_lock(Context& ctx, const PackageManager& pm) {
  for (const auto& path : lock_paths(pm)) {
    const std::string shown = ctx.opts.root.empty() || ctx.opts.root == "/"
                                  ? path
                                  : ctx.opts.root + path;
    if (auto holder = lock_holder(ctx.host.fs().resolve(path), shown))
      return holder;
  }
  return std::nullopt;
}

// A fix that fits the holder: unattended-upgrades is the usual one.
std::string lock_fix(const LockHolder& h) {
  if (h.command.rfind("unattended", 0) == 0) {
    return "unattended-upgrades is installing updates (fresh Ubuntu nodes do "
           "this for minutes): let it finish (sudo systemctl status "
           "unattended-upgrades) or stop it (sudo systemctl stop "
           "unattended-upgrades), then run install again with a --timeout "
           "long enough; never remove the lock file";
  }
  return "let " + h.text() +
         " finish (or stop it), then run install again with a --timeout "
         "long enough; never remove the lock file";
}

std::string family_tool(const PackageManager& pm) {
  return pm.family == "deb" ? "dpkg" : "rpm";
}

// Waits until no one holds the locks: says so once per holder, as apt does
// ("Waiting for cache lock: Could not get lock ..."), and gives up at the
// deadline or on an interrupt.
Result<void> wait_for_locks(Context& ctx, const PackageManager& pm) {
  std::string told;
  for (;;) {
    // An interrupt that came before the transaction started: none starts.
    if (stop_requested()) {
      return Error{ExitCode::kInterrupted, "toolkit",
                   "interrupted by " + signal_name(interrupted()) + " before " +
                       family_tool(pm) + " started; nothing was installed" +
                       (told.empty() ? std::string() : " (" + told + ")"),
                   "run the same command again: it checks every layer and "
                   "goes on from here"};
    }
    const auto holder = held_lock(ctx, pm);
    if (!holder) return {};
    const std::string words = "Could not get lock " + holder->path +
                              ". It is held by " + holder->text();
    if (ctx.time_left().count() == 0) {
      return Error{ExitCode::kTimeout, "toolkit",
                   "the --timeout ran out waiting for " + family_tool(pm) +
                       "'s lock: " + words +
                       " (another package manager is running); nothing was "
                       "installed",
                   lock_fix(*holder)};
    }
    if (told != words) {
      ctx.notice("toolkit", "Waiting for cache lock: " + words + " (" +
                                std::to_string(ctx.time_left().count() / 1000) +
                                " s left of the --timeout)");
      told = words;
    }
    ctx.host.clock().sleep_for(std::min(kLockPoll, ctx.time_left()));
  }
}

}  // namespace

Result<ProcessResult> run_package_transaction(
    Context& ctx, const PackageManager& pm,
    const std::vector<std::string>& argv) {
  const std::string tool = family_tool(pm);
  // A second Ctrl-C must not end gpunode while the transaction runs: it
  // stays to see how the transaction ended.
  SecondSignalHold hold;
  for (;;) {
    if (auto free = wait_for_locks(ctx, pm); !free) return free.error();
    auto notice = [&](ProcessRunner::UncutEvent e) {
      const std::string who = signal_name(interrupted());
      switch (e) {
        case ProcessRunner::UncutEvent::kSignal:
          ctx.notice("toolkit", who + ": waiting for " + tool +
                                    " to finish its transaction; gpunode "
                                    "stops after it (cutting it would leave "
                                    "the packages half-installed)");
          break;
        case ProcessRunner::UncutEvent::kSignalAgain:
          ctx.notice("toolkit",
                     who + " again: still waiting for " + tool +
                         " to finish its transaction, which gpunode never "
                         "cuts; it stops after it (kill -9 would end gpunode "
                         "only, and " +
                         tool + " would still finish on its own)");
          break;
        case ProcessRunner::UncutEvent::kPastPatience:
          ctx.notice("toolkit", "the --timeout ran out: waiting for " + tool +
                                    " to finish its transaction; gpunode "
                                    "stops after it (cutting it would leave "
                                    "the packages half-installed)");
          break;
      }
    };
    ProcessResult r = ctx.host.proc().run_uncut(argv, ctx.time_left(), notice);
    // Another package manager took the lock between the look and the start:
    // nothing was changed; wait for it again.
    if (!r.succeeded() && says_locked(r) && !r.outlasted_interrupt &&
        ctx.time_left().count() > 0 && !interrupted())
      continue;
    return r;
  }
}

}  // namespace gpunode
