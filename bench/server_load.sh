#!/usr/bin/env bash
# Many small live jobs on one `eddy serve`. Each job is the issue's small
# live job: the orders generator paced on the wall clock at RATE events/s,
# a 1 s tumbling count per country, an NDJSON sink; one instance per keyed
# operator; a checkpoint every CHECKPOINT. JOB=reference runs the whole
# reference pipeline as each job instead.
#
# Modes, run one after another in the same run (MODES, default `pool`, and
# `before` when EDDY_BEFORE is set):
#   pool       the eddy built here (tasks on the shared worker pool)
#   unchained  the same with --no-chaining (every node a task of its own)
#   tasks      the same with --pool-share task (the pool split between
#              tasks, not jobs)
#   before     the eddy binary EDDY_BEFORE (an earlier build), as it is
#
# For each mode: submit JOBS jobs over HTTP, wait until every one runs,
# let them run WARMUP s, then measure over MEASURE s the server's threads
# (/proc/PID/task, most seen), resident memory (VmRSS), CPU (utime + stime
# over the span, in % of one core) and the jobs' last checkpoint durations
# (mean and max over the jobs, from GET /api/v1/jobs/{id}). Then the
# result latency over LATENCY s more (bench/tail_latency.py: each window's
# row as it comes over the sink's tail, against when the row that closes
# the window was due on the wall clock, by the job's generator's own report
# of its pacing and the generated stream; p50 and p99 over all jobs' rows;
# reference jobs: their device metrics),
# kept out of the CPU span since tails cost the server work. LATENCY=0
# skips it.
# Loopback only; bounded in time (per mode about JOBS x 0.05 + WARMUP +
# MEASURE + LATENCY s).
#
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/server_load.sh    # 100 jobs
#   EDDY_BEFORE=/path/to/older/eddy bench/server_load.sh                             # before and after
#   JOBS=10 WARMUP=2 MEASURE=3 LATENCY=3 bench/server_load.sh                        # seconds
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/serve-lib.sh

JOBS=${JOBS:-100}
RATE=${RATE:-20}
WARMUP=${WARMUP:-10}
MEASURE=${MEASURE:-20}
LATENCY=${LATENCY:-10}
DELAY_MS=200
CHECKPOINT=${CHECKPOINT:-2s}
. bench/lib.sh
build_eddy

server_scratch

sql=$(cat <<SQL
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '$DELAY_MS' MILLISECOND
) WITH (connector = 'generator', stream = 'orders', rate = '$RATE', count = '1000000000', realtime = 'true', seed = '\${SEED}');
CREATE TABLE counts (country VARCHAR, window_end_ms BIGINT, n BIGINT)
  WITH (connector = 'ndjson', path = 'counts-\${SEED}.ndjson');
INSERT INTO counts
SELECT country, CAST(window_end AS BIGINT), count(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
GROUP BY country, window_start, window_end;
SQL
)

# JOB=reference: each job is the whole reference pipeline (queries/, its
# generators paced on the wall clock at RATE background events/s, without
# end rather than its 60-second scenario).
if [ "${JOB:-small}" = reference ]; then
  sql=$(cat queries/*.sql | sed "s/rate = '\${RATE:2}'/rate = '$RATE', realtime = 'true', count = '1000000000'/")
  what="the reference pipeline (queries/) on its generators paced at $RATE background events/s each"
else
  what="orders generator at $RATE events/s each, 1 s tumbling count, NDJSON sink"
fi

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# The sink whose rows' latency is measured: its name, the column holding
# each row's window end, the generated table its windows read, and that
# table's watermark delay. Reference jobs: the device metrics (a 5 s window
# sliding by 1 s per site over the devices, which fires once the watermark,
# 2 s behind, passes its end by the table's 2 s allowed lateness).
if [ "${JOB:-small}" = reference ]; then
  timed="device_metrics window_end devices 4000"
else
  timed="counts window_end_ms orders $DELAY_MS"
fi

measure() {
  local mode=$1 bin=$2
  shift 2
  local dir="$work/$mode"
  mkdir -p "$dir"
  start_server "$bin" "$dir" --checkpoint-interval "$CHECKPOINT" "$@"
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
  local latency="- -"
  if [ "$LATENCY" != 0 ]; then
    # ID SINK FIELD ORIGIN_MS WALL_MS DELAY_MS per job (the origin is what
    # the job's generator reports: where its pacer started), then the tails.
    # An eddy too old to report where its generators started has none.
    read -r sink field table delay <<<"$timed"
    for ((i = 1; i <= JOBS; i++)); do
      id=${ids[$((i - 1))]}
      curl -sf "$base/api/v1/jobs/$id" | jq -r --arg t "generator $table:" \
        '.connectors[] | select(startswith($t)) | capture("event time (?<o>[0-9]+) at wall clock (?<w>[0-9]+)") | "\(.o) \(.w)"' |
        while read -r origin wall; do echo "$id $sink $field $origin $wall $delay $table $i $RATE"; done
    done > "$dir/timed"
    if [ -s "$dir/timed" ]; then
      latency=$(python3 bench/tail_latency.py "$base" "$LATENCY" "$EDDY" < "$dir/timed" | awk '{ print $2 " " $3 }')
    fi
  fi
  awk -v mode="$mode" -v jobs="$running" -v threads="$most" -v idle="$idle_threads" -v rss="$rss_kb" \
      -v cpu="$((after - before))" -v hz="$ticks" -v span="$MEASURE" -v ck="$checkpoints" -v lat="$latency" 'BEGIN {
    split(lat, l, " ")
    printf "%-10s %5d %8d %12.1f %9.0f %12.1f %14.2f   %-16s %s / %s\n", mode, jobs, threads, (threads - idle) / jobs,
      rss / 1024, cpu / hz / span * 100, cpu / hz / span * 100 / jobs, ck, l[1], l[2] }'
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
}

echo "$JOBS live jobs ($what), checkpoint every $CHECKPOINT; warm-up ${WARMUP} s, measured over ${MEASURE} s; profile $PROFILE; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(nproc) cores"
printf '%-10s %5s %8s %12s %9s %12s %14s   %-16s %s\n' mode jobs threads "threads/job" "RSS MiB" "CPU % core" "CPU %/job" "checkpoint ms" "latency ms p50 / p99"
# MODES: which modes, in which order.
for mode in ${MODES:-pool ${EDDY_BEFORE:+before}}; do
  case $mode in
    pool) measure pool "$EDDY" ;;
    unchained) measure unchained "$EDDY" --no-chaining ;;
    tasks) measure tasks "$EDDY" --pool-share task ;;
    before) measure before "${EDDY_BEFORE:?EDDY_BEFORE names the earlier eddy binary}" ;;
  esac
done
