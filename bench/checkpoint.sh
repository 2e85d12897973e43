#!/usr/bin/env bash
# Checkpoint cost: the window benchmark (tumbling 10 s count/sum per key over
# ROWS NDJSON order rows) without checkpoints and with a checkpoint every
# INTERVAL, best of RUNS each, in one command. Prints events/s of both, their
# ratio, and how many checkpoints were taken, the last one's size and their
# mean and longest duration (trigger to sinks committed).
#
#   bench/checkpoint.sh                                   # 10,000,000 rows, 1s, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/checkpoint.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-10000000}
INTERVAL=${INTERVAL:-1s}
RUNS=${RUNS:-3}
# eddy at its default batch size (2048)
# unless BATCH sets one.
batch=(${BATCH:+--batch-size "$BATCH"})
. bench/lib.sh
build_eddy

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data="$work/orders.ndjson"
"$EDDY" generate --stream orders --rate 1000 --count "$ROWS" > "$data"
echo "input: $ROWS rows, $(du -h "$data" | cut -f1) of NDJSON; profile $PROFILE; batch size ${BATCH:-2048}; best of $RUNS"

# best_of ARGS...: the run with the highest events/s.
best_of() {
  local best="" best_rate=0 line rate
  for _ in $(seq "$RUNS"); do
    rm -rf "$work/state"
    line=$("$EDDY" bench window --engine eddy --input "$data" "${batch[@]}" "$@")
    rate=$(field "$line" rows_per_second)
    if awk -v a="$rate" -v b="$best_rate" 'BEGIN { exit !(a > b) }'; then best=$line; best_rate=$rate; fi
  done
  echo "$best"
}

plain=$(best_of)
checkpointed=$(best_of --state-dir "$work/state" --checkpoint-interval "$INTERVAL")
echo "no checkpoints:        $plain"
echo "checkpoint every $INTERVAL: $checkpointed"
awk -v p="$(field "$plain" rows_per_second)" -v c="$(field "$checkpointed" rows_per_second)" \
    -v n="$(field "$checkpointed" checkpoints)" -v bytes="$(field "$checkpointed" checkpoint_max_bytes)" \
    -v mean="$(field "$checkpointed" checkpoint_mean_ms)" -v max="$(field "$checkpointed" checkpoint_max_ms)" \
    -v pm="$(field "$plain" peak_rss_bytes)" -v cm="$(field "$checkpointed" peak_rss_bytes)" 'BEGIN {
  printf "no checkpoints    %12.0f events/s  peak %7.1f MiB\n", p, pm / 1048576
  printf "checkpoints       %12.0f events/s  peak %7.1f MiB\n", c, cm / 1048576
  printf "throughput with checkpoints: %.3fx (cost %.1f%%)\n", c / p, (1 - c / p) * 100
  printf "checkpoints taken: %d; largest %.1f KiB; mean %d ms, longest %d ms (trigger to committed)\n", n, bytes / 1024, mean, max
}'
