#!/usr/bin/env bash
# Fuzzes eddy's user-input paths for a bounded time: NDJSON decoding (and
# the source's judging of the rows) and the SQL front end (parse + plan).
#   scripts/fuzz.sh                  # 20 s per target
#   FUZZ_SECONDS=600 SEED=7 scripts/fuzz.sh
# Prints executions and failures per target; failing inputs are kept under
# $CARGO_TARGET_DIR/fuzz. Exits non-zero on any failure, including an input
# that kills the process (reported with the input that did it).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}
SEED=${SEED:-$(date +%s)}
target_dir=${CARGO_TARGET_DIR:-target}
cargo build --locked --workspace --bin eddy-fuzz -q
fuzz="$target_dir/debug/eddy-fuzz"
out="$target_dir/fuzz"
mkdir -p "$out"
status=0
run() {
  local target=$1
  shift
  local rc=0
  "$fuzz" "$target" --seconds "$SECONDS_PER_TARGET" --seed "$SEED" --out "$out" "$@" || rc=$?
  if [ "$rc" -gt 1 ]; then
    cp "$out/current-$target" "$out/crash-$target-$SEED" 2>/dev/null || true
    echo "fuzz: $target: the process died (exit $rc) on the input in $out/crash-$target-$SEED" >&2
  fi
  [ "$rc" -eq 0 ] || status=1
}
run ndjson --corpus tests/data
run sql --corpus queries --corpus tests/sql
exit $status
