#!/usr/bin/env bash
# Runs tests of the real tier (Go tests in test/real/bed, compiled once by
# build-components.sh with the upstream parts) for ctest:
#
#   test/real/run-tier.sh TEST_NAME GPUNODE_BINARY STUB_DRIVER_DIR
#
# Exit 77 (skipped) when Go >= 1.24 is missing or the test skipped itself,
# with the reason on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=${1:?usage: run-tier.sh TEST_NAME GPUNODE_BINARY STUB_DRIVER_DIR}
export GPUNODE_BINARY=${2:?} GPUNODE_TEST_STUB_DRIVER=${3:?}
export GPUNODE_TEST_FIXTURES=$here/../fixtures GPUNODE_TEST_TOOLS=$here/../tools
status=0
bin=$(bash "$here/build-components.sh") || status=$?
[ "$status" -eq 0 ] || exit "$status"
export GPUNODE_REAL_BIN=$bin
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
"$bin/realbed.test" -test.run "^${name}\$" -test.v -test.timeout "${GPUNODE_REAL_TEST_TIMEOUT:-25m}" 2>&1 | tee "$log" || status=$?
if [ "$status" -eq 0 ] && grep -q -- '^--- SKIP' "$log" && ! grep -q -- '^--- PASS' "$log"; then
  exit 77
fi
if [ "$status" -eq 0 ] && ! grep -q -- '^--- PASS' "$log"; then
  echo "run-tier: no test named $name ran" >&2
  exit 1
fi
exit "$status"
