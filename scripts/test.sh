#!/usr/bin/env bash
# Sets up, builds and runs every test with ctest (unit, end-to-end, and the
# GPU tests, which skip cleanly on a machine without an NVIDIA GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cd build
ctest --output-on-failure --timeout 600 -j "${GPUNODE_TEST_JOBS:-2}" "$@"
