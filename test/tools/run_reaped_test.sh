#!/bin/sh
# The leftover check itself (ctest: meta-run-reaped-finds-leftovers): a clean
# command passes; a job left running fails, named, and is killed; so does a
# grandchild whose parent died (reparented to run_reaped, not to init); the
# command's own failure is passed on.  usage: run_reaped_test.sh RUN_REAPED
set -u
reaper=${1:?usage: run_reaped_test.sh RUN_REAPED}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "run_reaped_test: $*" >&2; exit 1; }

"$reaper" true || fail "a clean command failed"

"$reaper" sh -c 'sleep 3600 & echo $! >"$0"' "$tmp/job" 2>"$tmp/err"
[ $? -eq 1 ] || fail "a job left running did not fail the run"
grep -q "left running" "$tmp/err" || fail "no report: $(cat "$tmp/err")"
grep -q "sleep 3600" "$tmp/err" || fail "the job is not named: $(cat "$tmp/err")"
kill -0 "$(cat "$tmp/job")" 2>/dev/null && fail "the job was not killed"

# The subshell exits at once: its sleep is an orphan.
"$reaper" sh -c '(sleep 3600 & echo $! >"$0"); exit 0' "$tmp/orphan" 2>"$tmp/err"
[ $? -eq 1 ] || fail "an orphaned grandchild was missed"
kill -0 "$(cat "$tmp/orphan")" 2>/dev/null && fail "the orphan was not killed"

"$reaper" sh -c 'exit 3'
[ $? -eq 3 ] || fail "the command's exit status was not passed on"
echo "run_reaped_test: ok"
