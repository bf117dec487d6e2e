#!/usr/bin/env bash
# Benchmark: the cluster part over 10, 100 and 1,000 GPU nodes on the real
# control plane (test/real/bed/scale_bench_test.go), against kubectl apply
# --server-side + kubectl wait of the seed's manifests in the same run.
#
#   real_scale_bench.sh GPUNODE_BINARY STUB_DRIVER_DIR
#
# GPUNODE_BENCH_SIZES=10,100 picks other sizes. Needs root and Go >= 1.24
# (exit 77 without, as the real tier's tests).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export GPUNODE_REAL_BENCH=1 GPUNODE_REAL_TEST_TIMEOUT=${GPUNODE_REAL_TEST_TIMEOUT:-90m}
exec bash "$here/../real/run-tier.sh" TestRealScaleBench "${1:?usage: real_scale_bench.sh GPUNODE_BINARY STUB_DRIVER_DIR}" "${2:?}"
