#!/usr/bin/env bash
# Runs every benchmark in test/bench; each prints a ratio against a named peer
# measured in the same run. Needs root (a private containerd is started).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
for bench in build/test/*_bench; do
  echo "== $(basename "$bench")"
  "$bench"
done
