#!/usr/bin/env bash
# The closing lines of a test run: "N passed, N failed, N skipped" and the
# reason of each skipped test. Reads ctest's console output (OUT: its summary
# "X% tests passed, N tests failed out of T" and the "(Skipped)" list) and
# LastTest.log (LOG: each test's output, where a skipped Catch test printed
# "SKIPPED: <reason>" and a packaging script "<name>: skipped: <reason>").
# Exit 1 when OUT has no ctest summary: a run that did not happen is no pass.
#   scripts/test-summary.sh OUT LOG
set -euo pipefail
out=${1:?usage: test-summary.sh OUT LOG}
log=${2:?usage: test-summary.sh OUT LOG}

summary=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$out" | tail -n 1 || true)
if [ -z "$summary" ]; then
  echo "test-summary: no ctest summary in $out: the tests did not run" >&2
  exit 1
fi
total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")
failed=$(sed -E 's/.*, ([0-9]+) tests? failed.*/\1/' <<<"$summary")
skipped_names=$(sed -nE 's/^[[:space:]]*[0-9]+ - (.*) \(Skipped\)$/\1/p' "$out")
skipped=0
[ -n "$skipped_names" ] && skipped=$(wc -l <<<"$skipped_names")
passed=$((total - failed - skipped))

if [ "$skipped" -gt 0 ]; then
  echo "Skipped tests and why:"
  # name -> its skip reasons, from each test's block in LastTest.log.
  declare -A why=()
  if [ -f "$log" ]; then
    while IFS=$'\t' read -r name reason; do
      why[$name]+="${why[$name]:+; }$reason"
    done < <(awk '
      /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); name = $0; out = 0; next }
      /^Output:$/ { out = 1; next }
      /^<end of output>$/ { out = 0; next }
      out && /^SKIPPED: / { r = $0; sub(/^SKIPPED: /, "", r); print name "\t" r; next }
      out && /: skipped: / { r = $0; sub(/.*: skipped: /, "", r); print name "\t" r }
    ' "$log")
  fi
  while IFS= read -r name; do
    echo "  $name: ${why[$name]:-no reason printed}"
  done <<<"$skipped_names"
fi
echo "$summary"
echo "$passed passed, $failed failed, $skipped skipped"
