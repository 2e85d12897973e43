#!/usr/bin/env bash
# Each job's share of a server's worker pool. Two busy jobs on `eddy serve
# --workers 2`: ONE counts every generated payment in 20 sliding windows
# of its own key (one query, one task), MANY does so in six queries over the
# same stream (six tasks busy at once); both discard their counts, so their
# work is on the pool, not in their sources or sinks.
#
# For each way of splitting the pool (MODES, default `job task`: eddy serve
# --pool-share), in the same run: ONE alone for MEASURE s, then ONE beside
# MANY for MEASURE s. Each job's time on the pool comes from its own
# `pool_ms` (GET /api/v1/jobs/{id}): time its tasks spent in polls on the
# workers over the span. Split between jobs, ONE keeps about what it takes
# alone (a worker at most); split between tasks, MANY takes six turns to its
# one. Loopback only; about 2 x MEASURE + 10 s per mode.
#
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/pool_share.sh
#   MEASURE=3 bench/pool_share.sh                                  # seconds
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/serve-lib.sh
. bench/lib.sh

MEASURE=${MEASURE:-10}
build_eddy

server_scratch

# A job of QUERIES sliding counts over one endless generated stream.
sliding_sql() {
  local queries=$1 q
  echo "CREATE TABLE payments (
    payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE,
    payment_ts BIGINT NOT NULL, method VARCHAR,
    event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
    WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND)
  WITH (connector = 'generator', stream = 'payments', seed = '7', rate = '500', count = '1000000000');"
  for ((q = 0; q < queries; q++)); do
    echo "CREATE TABLE counts_$q (payment_id VARCHAR, window_start TIMESTAMP, n BIGINT) WITH (connector = 'blackhole');
  INSERT INTO counts_$q
  SELECT payment_id, window_start, count(*) AS n
  FROM TABLE(HOP(TABLE payments, DESCRIPTOR(event_time), INTERVAL '1' SECOND, INTERVAL '20' SECOND))
  GROUP BY payment_id, window_start, window_end;"
  done
}

submit() {
  jq -n --arg name "$1" --arg sql "$(sliding_sql "$2")" '{name: $name, sql: $sql, parallelism: 1}' |
    curl -sf -X POST -H 'content-type: application/json' --data-binary @- "$base/api/v1/jobs" | jq -r .id
}

pool_ms() { curl -sf "$base/api/v1/jobs/$1" | jq -r .pool_ms; }

# Seconds on the pool per second of the span, of each job named.
measure_span() {
  local id before=() after=() i
  for id in "$@"; do before+=("$(pool_ms "$id")"); done
  sleep "$MEASURE"
  for id in "$@"; do after+=("$(pool_ms "$id")"); done
  for ((i = 0; i < $#; i++)); do
    awk -v a="${after[$i]}" -v b="${before[$i]}" -v s="$MEASURE" 'BEGIN { printf "%.2f ", (a - b) / 1000 / s }'
  done
}

measure() {
  local mode=$1 dir="$work/$1"
  mkdir -p "$dir"
  start_server "$EDDY" "$dir" --workers 2 --pool-share "$mode"
  local one many alone beside
  one=$(submit one 1)
  sleep 2
  alone=$(measure_span "$one")
  many=$(submit many 6)
  sleep 2
  beside=$(measure_span "$one" "$many")
  awk -v mode="$mode" -v alone="$alone" -v beside="$beside" 'BEGIN {
    split(beside, b, " ")
    printf "%-6s %14.2f %14.2f %14.2f %12.0f%%\n", mode, alone, b[1], b[2], b[1] / alone * 100 }'
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
}

echo "pool share: ONE (1 query) alone, then beside MANY (6 queries), 2 workers, ${MEASURE} s each; profile $PROFILE; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(nproc) cores"
echo "(workers busy with each job: seconds on the pool per second)"
printf '%-6s %14s %14s %14s %13s\n' split "ONE alone" "ONE beside" "MANY beside" "ONE kept"
for mode in ${MODES:-job task}; do
  measure "$mode"
done
