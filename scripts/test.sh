#!/usr/bin/env bash
# Sets up, builds and runs every test with ctest (unit, end-to-end, and the
# GPU tests, which are skipped on a machine without an NVIDIA GPU). ctest runs
# under build/test/run_reaped, which fails the run when a test leaves a
# process running. Ends with how many tests passed, failed and were skipped,
# and why each skipped one was (scripts/test-summary.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The real tier's upstream parts, built once per machine into a cache
# outside the checkout (cold about 15 minutes on two cores, warm seconds);
# without Go >= 1.24 its tests show as skipped.
real_status=0
bash test/real/build-components.sh >/dev/null || real_status=$?
[ "$real_status" -eq 0 ] || [ "$real_status" -eq 77 ] || exit "$real_status"
cd build
mkdir -p Testing/Temporary
out=Testing/Temporary/gpunode-ctest-output.log
status=0
./test/run_reaped ctest --output-on-failure --timeout 600 \
  -j "${GPUNODE_TEST_JOBS:-2}" "$@" 2>&1 | tee "$out" || status=$?
if grep -q '^run_reaped: .* left running by the tests' "$out"; then
  echo "test.sh: FAILED: the tests left processes running (listed above)"
fi
bash ../scripts/test-summary.sh "$out" Testing/Temporary/LastTest.log || status=1
exit "$status"
