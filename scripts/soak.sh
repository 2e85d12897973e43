#!/usr/bin/env bash
# Runs one test of a test binary again and again, to catch a rare failure:
# a run that fails or takes longer than TIMEOUT seconds is reported with its
# log kept. Build the tests first (cargo test --no-run).
#
#   scripts/soak.sh TEST_BINARY_NAME TEST_NAME [RUNS] [TIMEOUT]
#   scripts/soak.sh kafka operators_keyed_otherwise_than_the_topics_get_their_rows_through_exchange_topics 100 90
set -uo pipefail
cd "$(dirname "$0")/.."
binary=${1:?usage: soak.sh TEST_BINARY_NAME TEST_NAME [RUNS] [TIMEOUT]}
test=${2:?usage: soak.sh TEST_BINARY_NAME TEST_NAME [RUNS] [TIMEOUT]}
runs=${3:-40}
timeout=${4:-90}
target=${CARGO_TARGET_DIR:-target}
bin=$(ls -t "$target"/debug/deps/"$binary"-* 2>/dev/null | grep -v '\.d$' | head -1)
[ -x "$bin" ] || { echo "soak: no test binary $binary under $target (cargo test --no-run)" >&2; exit 2; }
logs=$(mktemp -d)
failed=0
cd crates/eddy-cli
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  timeout "$timeout" "$bin" "$test" --exact --test-threads 1 >"$logs/run-$i.log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  if [ $rc -ne 0 ]; then
    failed=$((failed + 1))
    echo "run $i: failed (exit $rc, ${took}s): $logs/run-$i.log"
  else
    rm -f "$logs/run-$i.log"
  fi
done
echo "soak: $failed of $runs runs failed (logs of failures in $logs)"
[ $failed -eq 0 ]
