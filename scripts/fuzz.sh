#!/usr/bin/env bash
# Builds the libFuzzer targets (test/fuzz) into ./build-fuzz with clang and
# runs each for RUNS inputs (default 1000000) over a scratch copy of its
# seed corpus (test/fuzz/corpus/<target> is never written to). Prints, per
# target, executions, seconds, exec/s, coverage gained and crashes; exits
# non-zero on any crash, leak, timeout or out-of-memory. Crashing inputs are
# left in build-fuzz/artifacts/.
#   GPUNODE_FUZZ_JOBS=2  runs two targets at a time (default 1)
#   GPUNODE_FUZZ_SEED=N  libFuzzer's random seed (default 1: repeatable)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000000}
targets=(containerd_config bundle_manifest nvidia_smi kubeconfig oci_archive
  watch_events toolkit_package)

# The project's libraries (scripts/setup.sh installs them only when missing),
# then clang and its fuzzer/sanitizer runtimes, likewise.
GPUNODE_SETUP_PACKAGES_ONLY=1 bash scripts/setup.sh
fuzz_packages=(clang libclang-rt-14-dev)
. scripts/lib/ensure-packages.sh
ensure_packages fuzz "${fuzz_packages[@]}"

jobs=${GPUNODE_BUILD_JOBS:-$(nproc)}
# -O1: the usual trade between speed and readable sanitizer reports.
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DGPUNODE_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
ninja -C build-fuzz -j "$jobs" "${targets[@]/%/_fuzz}"

out=build-fuzz/fuzz-run
rm -rf "$out"
mkdir -p "$out" build-fuzz/artifacts

# One target: scratch corpus, run, then one summary line in $out/<t>.sum.
run_target() {
  local t=$1 corpus="$out/corpus-$1" log="$out/$1.log"
  cp -r "test/fuzz/corpus/$t" "$corpus"
  local seeds start end rc=0
  seeds=$(find "$corpus" -type f | wc -l)
  start=$(date +%s.%N)
  "build-fuzz/test/fuzz/${t}_fuzz" -runs="$runs" -seed="${GPUNODE_FUZZ_SEED:-1}" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$t-" "$corpus" >"$log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  local execs cov0 cov1 units
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov0=$(sed -n 's/.*INITED cov: \([0-9]*\).*/\1/p' "$log" | head -1)
  cov1=$(sed -n 's/.*DONE *cov: \([0-9]*\).*/\1/p' "$log" | tail -1)
  units=$(sed -n 's/^stat::new_units_added: *//p' "$log")
  awk -v t="$t" -v e="${execs:-0}" -v s="$start" -v f="$end" -v c0="${cov0:-?}" \
    -v c1="${cov1:-?}" -v u="${units:-0}" -v n="$seeds" -v rc="$rc" 'BEGIN {
      secs = f - s
      printf "%-18s %10d %8.1f %9.0f %5d %6s -> %-6s %6d %s\n", t, e, secs,
        (secs > 0 ? e / secs : 0), n, c0, c1, u, (rc == 0 ? "0" : "FAILED rc=" rc)
    }' >"$out/$t.sum"
  return "$rc"
}

status=0
pids=()
for t in "${targets[@]}"; do
  run_target "$t" &
  pids+=($!)
  if [ ${#pids[@]} -ge "${GPUNODE_FUZZ_JOBS:-1}" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done

printf "%-18s %10s %8s %9s %5s %16s %6s %s\n" target execs seconds exec/s seeds \
  "cov (edges)" "new" crashes
for t in "${targets[@]}"; do cat "$out/$t.sum"; done
if [ "$status" -ne 0 ]; then
  echo "fuzz: a target failed; logs in $out/, inputs in build-fuzz/artifacts/" >&2
  for t in "${targets[@]}"; do
    if grep -q FAILED "$out/$t.sum"; then
      grep -m1 -A25 "ERROR: \|==ERROR\|runtime error\|deadly signal" "$out/$t.log" >&2 || true
    fi
  done
fi
exit "$status"
