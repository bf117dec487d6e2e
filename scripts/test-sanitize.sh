#!/usr/bin/env bash
# Builds everything with ASan+UBSan into ./build-asan and runs the whole ctest
# suite there (unit, e2e, gpu). The e2e tests spawn the sanitized gpunode
# binary; its reports must fail the run even when a test only looks at the
# exit code, so every report also goes to a log file, and any log file left
# at the end fails this script.
set -euo pipefail
cd "$(dirname "$0")/.."
GPUNODE_SETUP_PACKAGES_ONLY=1 bash scripts/setup.sh

jobs=${GPUNODE_BUILD_JOBS:-$(nproc)}
# -O1 -g1: readable stacks, and a build that fits two shared cores.
. scripts/lib/build.sh
configure_build build-asan -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DGPUNODE_SANITIZE=ON
build_with_progress test-sanitize build-asan "$jobs"

logs="$PWD/build-asan/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
# exitcode 86: a distinct status, so a test expecting a failure exit (1..5)
# does not pass by accident. Children inherit these (test_support passes the
# environment on), so the spawned gpunode reports the same way.
export ASAN_OPTIONS="halt_on_error=1:exitcode=86:detect_leaks=1:detect_stack_use_after_return=1:log_path=$logs/asan"
export UBSAN_OPTIONS="halt_on_error=1:exitcode=86:print_stacktrace=1:log_path=$logs/ubsan"
export LSAN_OPTIONS="exitcode=86"

status=0
# Left out here, and run by scripts/test.sh on the plain build:
# - the packaging tests (label package) run the binary inside a debootstrap
#   chroot without /proc, where LeakSanitizer cannot work; they prove the
#   portable tree, not memory safety;
# - the Ansible tests (label ansible) spend their minutes in ansible-playbook
#   and sshd; every gpunode path they reach is one the e2e tests run here,
#   against the same simulated nodes, so under ASan they only doubled CI;
# - the real tier (label real) proves gpunode against upstream Kubernetes,
#   containerd and the device plugin; the gpunode paths it takes are the
#   e2e tests' paths against the simulator, which run here.
# run_reaped: as in scripts/test.sh, a test that leaves a process running
# fails the run.
(cd build-asan && mkdir -p Testing/Temporary &&
  ./test/run_reaped ctest --output-on-failure --timeout 900 -LE 'package|ansible|real' \
    -j "${GPUNODE_TEST_JOBS:-2}" "$@" 2>&1 |
  tee Testing/Temporary/gpunode-ctest-output.log) || status=$?
(cd build-asan && bash ../scripts/test-summary.sh \
  Testing/Temporary/gpunode-ctest-output.log Testing/Temporary/LastTest.log) ||
  status=1

if compgen -G "$logs/*" >/dev/null; then
  echo "test-sanitize: sanitizer reports (also from spawned processes):" >&2
  for f in "$logs"/*; do
    echo "=== $f" >&2
    cat "$f" >&2
  done
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "test-sanitize: all tests passed under ASan+UBSan, no reports"
fi
exit "$status"
