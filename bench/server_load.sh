#!/usr/bin/env bash
# Many small live jobs on one `eddy serve`, with operator chaining and
# without (`eddy serve --no-chaining`), in the same run. Each job is the
# issue's small live job: the orders generator paced on the wall clock at
# RATE events/s, a 1 s tumbling count per country, an NDJSON sink; one
# instance per keyed operator; a checkpoint every CHECKPOINT. JOB=reference
# runs the whole reference pipeline as each job instead.
#
# For each mode: submit JOBS jobs over HTTP, wait until every one runs,
# let them run WARMUP s, then measure over MEASURE s the server's threads
# (/proc/PID/task, most seen), resident memory (VmRSS), CPU (utime + stime
# over the span, in % of one core) and the jobs' last checkpoint durations
# (mean and max over the jobs, from GET /api/v1/jobs/{id}). Loopback only;
# bounded in time (about 2 x (JOBS x 0.05 + WARMUP + MEASURE) s).
#
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/server_load.sh    # 100 jobs
#   JOBS=10 WARMUP=2 MEASURE=3 bench/server_load.sh                                  # seconds
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/serve-lib.sh

JOBS=${JOBS:-100}
RATE=${RATE:-20}
WARMUP=${WARMUP:-10}
MEASURE=${MEASURE:-20}
CHECKPOINT=${CHECKPOINT:-2s}
. bench/lib.sh
build_eddy

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

sql=$(cat <<SQL
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '200' MILLISECOND
) WITH (connector = 'generator', stream = 'orders', rate = '$RATE', count = '1000000000', realtime = 'true', seed = '\${SEED}');
CREATE TABLE counts (country VARCHAR, window_end TIMESTAMP, n BIGINT)
  WITH (connector = 'ndjson', path = 'counts-\${SEED}.ndjson');
INSERT INTO counts
SELECT country, window_end, count(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
GROUP BY country, window_start, window_end;
SQL
)

# JOB=reference: each job is the whole reference pipeline (queries/, its
# generators paced on the wall clock at RATE background events/s).
if [ "${JOB:-small}" = reference ]; then
  sql=$(cat queries/*.sql | sed "s/rate = '\${RATE:2}'/rate = '$RATE', realtime = 'true'/")
  what="the reference pipeline (queries/) on its generators paced at $RATE background events/s each"
else
  what="orders generator at $RATE events/s each, 1 s tumbling count, NDJSON sink"
fi

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

measure() {
  local mode=$1
  shift
  local dir="$work/$mode"
  mkdir -p "$dir"
  start_server "$EDDY" "$dir" --checkpoint-interval "$CHECKPOINT" "$@"
  local idle_threads ids=() i
  sleep 1
  idle_threads=$(ls "/proc/$server/task" | wc -l)
  for ((i = 1; i <= JOBS; i++)); do
    ids+=("$(jq -n --arg sql "$sql" --arg seed "$i" \
      '{name: ("load-" + $seed), sql: $sql, params: {SEED: $seed}, parallelism: 1}' |
      curl -sf -X POST -H 'content-type: application/json' --data-binary @- "$base/api/v1/jobs" | jq -r .id)")
  done
  for id in "${ids[@]}"; do
    for _ in $(seq 100); do
      [ "$(curl -sf "$base/api/v1/jobs/$id" | jq -r .state)" = running ] && break
      sleep 0.1
    done
  done
  sleep "$WARMUP"
  local before after most=0 n end
  before=$(cpu_ticks "$server")
  end=$((SECONDS + MEASURE))
  while [ $SECONDS -lt $end ]; do
    n=$(ls "/proc/$server/task" | wc -l)
    [ "$n" -gt "$most" ] && most=$n
    sleep 0.5
  done
  after=$(cpu_ticks "$server")
  local rss_kb
  rss_kb=$(awk '/VmRSS/ { print $2 }' "/proc/$server/status")
  local running=0 durations=()
  for id in "${ids[@]}"; do
    local view
    view=$(curl -sf "$base/api/v1/jobs/$id")
    [ "$(jq -r .state <<<"$view")" = running ] && running=$((running + 1))
    durations+=("$(jq -r '.checkpoints.last_duration_ms' <<<"$view")")
  done
  local checkpoints
  checkpoints=$(printf '%s\n' "${durations[@]}" | awk '{ s += $1; if ($1 > m) m = $1 } END { printf "%.0f / %d", s / NR, m }')
  awk -v mode="$mode" -v jobs="$running" -v threads="$most" -v idle="$idle_threads" -v rss="$rss_kb" \
      -v cpu="$((after - before))" -v hz="$ticks" -v span="$MEASURE" -v ck="$checkpoints" 'BEGIN {
    printf "%-10s %5d %8d %12.1f %9.0f %12.1f %14.2f   %s\n", mode, jobs, threads, (threads - idle) / jobs,
      rss / 1024, cpu / hz / span * 100, cpu / hz / span * 100 / jobs, ck }'
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
}

echo "$JOBS live jobs ($what), checkpoint every $CHECKPOINT; warm-up ${WARMUP} s, measured over ${MEASURE} s; profile $PROFILE; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(nproc) cores"
printf '%-10s %5s %8s %12s %9s %12s %14s   %s\n' mode jobs threads "threads/job" "RSS MiB" "CPU % core" "CPU %/job" "checkpoint ms mean / max"
# MODES: which modes, in which order (default both, chained first).
for mode in ${MODES:-chained unchained}; do
  case $mode in
    chained) measure chained ;;
    unchained) measure unchained --no-chaining ;;
  esac
done
