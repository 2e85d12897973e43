#!/usr/bin/env bash
# Checkpoints of keyed state: per-key totals (GROUP BY without a window)
# over KEYS accounts opened first, then HOT events on HOT_KEYS of them, a
# checkpoint every INTERVAL, with keyed tables written as their changes (the
# default) and whole (--full-checkpoints), in turn RUNS times each. Prints
# per mode the median (min-max) of events/s, checkpoints taken and KiB
# written per checkpoint, and the ratios of the medians. The output goes to
# a blackhole sink, so both modes do the same work but for what they write.
#
#   bench/keyed_checkpoints.sh                        # 1,000,000 keys, 10,000,000 hot events, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/keyed_checkpoints.sh
set -euo pipefail
cd "$(dirname "$0")/.."

KEYS=${KEYS:-1000000}
HOT=${HOT:-10000000}
HOT_KEYS=${HOT_KEYS:-10000}
INTERVAL=${INTERVAL:-1s}
RUNS=${RUNS:-5}
. bench/lib.sh
build_eddy

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk -v keys="$KEYS" -v hot="$HOT" -v hot_keys="$HOT_KEYS" 'BEGIN {
  srand(7)
  for (i = 0; i < keys; i++) printf "{\"k\":\"a%d\",\"v\":%d}\n", i, i % 7
  step = int(keys / hot_keys)
  for (i = 0; i < hot; i++) printf "{\"k\":\"a%d\",\"v\":%d}\n", int(rand() * hot_keys) * step, int(rand() * 100)
}' > "$work/events.ndjson"
cat > "$work/job.sql" <<SQL
CREATE TABLE events (k VARCHAR, v BIGINT) WITH (connector = 'file', path = '$work/events.ndjson');
CREATE TABLE totals (k VARCHAR, n BIGINT, total BIGINT) WITH (connector = 'blackhole');
INSERT INTO totals SELECT k, count(*), sum(v) FROM events GROUP BY k;
SQL
rows=$((KEYS + HOT))
echo "input: $KEYS keys, then $HOT events on $HOT_KEYS of them ($(du -h "$work/events.ndjson" | cut -f1) of NDJSON); a checkpoint every $INTERVAL; profile $PROFILE; $RUNS runs each, in turn; commit $(git rev-parse --short HEAD); $(nproc) cores"

# run MODE: prints "events/s checkpoints KiB-per-checkpoint" of one run.
run() {
  rm -rf "$work/state"
  local flags=()
  [ "$1" = whole ] && flags=(--full-checkpoints)
  local err ms taken mib
  err=$("$EDDY" run "$work/job.sql" --state-dir "$work/state" --checkpoint-interval "$INTERVAL" "${flags[@]}" 2>&1 >/dev/null)
  ms=$(sed -n 's/^finished in \([0-9]*\) ms$/\1/p' <<<"$err")
  taken=$(sed -n 's/^checkpoints: \([0-9]*\) taken.*/\1/p' <<<"$err")
  mib=$(sed -n 's/^checkpoints: [0-9]* taken, \([0-9.]*\) MiB written in all.*/\1/p' <<<"$err")
  if [ -z "$ms" ] || [ -z "$taken" ]; then echo "unexpected summary: $err" >&2; exit 1; fi
  awk -v r="$rows" -v ms="$ms" -v n="$taken" -v mib="$mib" 'BEGIN { printf "%.0f %d %.1f\n", r / (ms / 1000), n, mib * 1024 / n }'
}

: > "$work/changes"
: > "$work/whole"
for ((i = 0; i < RUNS; i++)); do
  run changes >> "$work/changes"
  run whole >> "$work/whole"
done

# stats FILE COLUMN: "median (min-max)"
stats() { cut -d' ' -f"$2" "$1" | sort -g | awk '{ v[NR] = $1 } END { printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR] }'; }
median() { cut -d' ' -f"$2" "$1" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for mode in changes whole; do
  printf "%-8s events/s %s; checkpoints %s; KiB per checkpoint %s\n" "$mode" "$(stats "$work/$mode" 1)" "$(stats "$work/$mode" 2)" "$(stats "$work/$mode" 3)"
done
awk -v ce="$(median "$work/changes" 1)" -v we="$(median "$work/whole" 1)" \
    -v ck="$(median "$work/changes" 3)" -v wk="$(median "$work/whole" 3)" 'BEGIN {
  printf "changes/whole: events/s %.2fx, bytes per checkpoint %.3fx\n", ce / we, ck / wk
}'
