#!/usr/bin/env bash
# Sustained load from Kafka: eddy and Apache Flink 1.20 each read topics fed
# live at a fixed rate, checkpointing every 10 s, and print each result as
# they make it; latency is measured from produce time to the result line.
# The same SQL files run on both, as they are (bench/kafka_flink/: Flink's
# Kafka table options, which eddy reads as its own):
#   window  a 1 s tumbling count per country over the orders
#   join    payments JOIN orders within 10 s either way (interval join)
# For each query, RATE (events/s over both topics; the join's are half
# orders, half payments) and engine, one after the other:
# - fresh topics of PARTITIONS partitions on the Kafka-protocol broker
#   (scripts/kafka-broker.sh, in memory on this machine);
# - the engine starts and reads them from their start (Flink: PyFlink's
#   local MiniCluster at parallelism FLINK_PARALLELISM, hashmap state,
#   checkpoints to a local directory, buffer timeout and watermark
#   interval 10 ms (its low-latency settings), the Kafka connector from
#   PyPI's shigawire-apache-flink-libraries; eddy: `eddy run --state-dir`
#   at its defaults);
# - once it runs, the feed writes SECONDS_TO_RUN seconds of events:
#   `eddy generate --realtime` (event time advancing with the wall clock)
#   piped into `eddy run` writing the topic (keyed by order_id, at least
#   once), one feed per topic;
# - DRAIN_S seconds after the feed ends (and the feed's rows are made
#   again, unpaced, for the measures), the engine is stopped.
# Every result line is stamped as it arrives (bench/kafka_latency.py);
# latency is arrival minus the instant the result could first exist: for a
# window, when the first event at or after its end plus the 2 s watermark
# delay was due; for a join pair, when the later of its two rows was due.
# A join row is written by the feed once the latest event time before it
# in its stream is due (the generator's rows are up to 1.5 s out of
# order), so a pair's rows are placed there, from the same generator's
# rows. The first 2 s are left out. The feed, the broker and the engine
# share the machine's cores; how late the feed wrote its last record to
# the topic is shown (past 1 s, it did not offer the rate: marked behind,
# and latencies then include the feed's delay).
# CPU is the engine's (every process and thread of it) from the feed's
# start to the engine's stop.
# Both engines' results are compared by value (bench/compare_outputs.py);
# the script fails on a difference where both kept up (p99 under 1 s).
# Prints a markdown table: per query and rate, each engine's p50, p99 and
# max latency, result rows, CPU seconds per million events, and checkpoints
# completed.
#
#   bench/kafka_flink.sh                                   # 50k to 400k events/s, 30 s each, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/kafka_flink.sh
#   RATES=20000 SECONDS_TO_RUN=6 bench/kafka_flink.sh      # the test command's check
#   README=1 ...                                           # also write the table into bench/README.md
set -euo pipefail
cd "$(dirname "$0")/.."

RATES=${RATES:-50000 100000 200000 400000}
SECONDS_TO_RUN=${SECONDS_TO_RUN:-30}
QUERIES=${QUERIES:-window join}
ENGINES=${ENGINES:-eddy flink}
PARTITIONS=${PARTITIONS:-2}
DRAIN_S=${DRAIN_S:-5}
FETCH_WAIT_MS=${FETCH_WAIT_MS:-10}
PORT=${PORT:-19194}
FLINK_PARALLELISM=${FLINK_PARALLELISM:-$(nproc)}
. bench/lib.sh
[ -n "${PARALLELISM:-}" ] || unset EDDY_PARALLELISM
build_eddy
flink_env
flink_kafka_jars
broker=$(scripts/kafka-broker.sh path)

work=$(mktemp -d)
"$broker" broker --listener-url "tcp://127.0.0.1:$PORT" --advertised-listener-url "tcp://127.0.0.1:$PORT" \
  > "$work/broker.log" 2>&1 &
broker_pid=$!
trap 'signal_tree TERM $broker_pid; rm -rf "$work"' EXIT
for _ in $(seq 100); do (exec 3<> "/dev/tcp/127.0.0.1/$PORT") 2> /dev/null && break; sleep 0.1; done

# feed STREAM TOPIC RATE: writes SECONDS_TO_RUN seconds of STREAM at RATE
# events/s into TOPIC, paced; the pacing line goes to $work/pacing-STREAM.
feed() {
  local stream=$1 topic=$2 rate=$3 columns
  case $stream in
    orders) columns="order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR" ;;
    payments) columns="payment_id VARCHAR, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT, method VARCHAR" ;;
  esac
  cat > "$work/feed-$stream.sql" <<SQL
CREATE TABLE feed_in ($columns) WITH (connector = 'stdin');
CREATE TABLE feed_out ($columns) WITH (connector = 'kafka', bootstrap_servers = '127.0.0.1:$PORT',
  topic = '$topic', key_column = 'order_id', delivery = 'at_least_once');
INSERT INTO feed_out SELECT * FROM feed_in;
SQL
  "$EDDY" generate --stream "$stream" --rate "$rate" --count $((rate * SECONDS_TO_RUN)) --realtime 2> "$work/pacing-$stream" |
    "$EDDY" run --quiet "$work/feed-$stream.sql"
  date +%s%3N > "$work/fed-$stream"
}

# feed_lag_ms STREAM RATE: how long after its schedule's end the feed had
# written its last record to the topic (past 1 s, the feed did not offer
# the rate).
# Its last event time is the highest among the stream's last rows (they
# are at most 1.5 s out of order), from the same generator unpaced.
feed_lag_ms() {
  local stream=$1 rate=$2 column wall origin last
  column=$([ "$stream" = orders ] && echo order_ts || echo payment_ts)
  origin=$(sed -nE 's/.*event time ([0-9]+) ms is due.*/\1/p' "$work/pacing-$stream")
  wall=$(sed -nE 's/.*is due at wall clock ([0-9]+) ms.*/\1/p' "$work/pacing-$stream")
  "$EDDY" generate --stream "$stream" --rate "$rate" --count $((rate * SECONDS_TO_RUN)) > "$work/$stream.ndjson"
  last=$(tail -n 100000 "$work/$stream.ndjson" | grep -o "\"$column\":[0-9]*" | cut -d: -f2 | sort -n | tail -1)
  echo $(($(cat "$work/fed-$stream") - (wall + last - origin)))
}

# tree_cpu PID: CPU seconds used by PID and every process under it.
tree_cpu() {
  local pid total=0 ticks
  ticks=$(getconf CLK_TCK)
  for pid in $(tree_pids "$1"); do
    total=$((total + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2> /dev/null || echo 0)))
  done
  awk -v t="$total" -v k="$ticks" 'BEGIN { printf "%.2f", t / k }'
}
tree_pids() {
  local pid
  echo "$1"
  for pid in $(pgrep -P "$1"); do tree_pids "$pid"; done
}

# live_run QUERY RATE ENGINE: one engine over freshly fed topics; appends
# its record to $work/runs.tsv.
live_run() {
  local q=$1 rate=$2 engine=$3 name="$1-$2-$3" files engine_pid started fed_s cpu checkpoints stats
  local orders_topic="orders-$name" payments_topic="payments-$name"
  for topic in "$orders_topic" "$payments_topic"; do
    "$broker" topic create "$topic" --partitions "$PARTITIONS" --broker "tcp://127.0.0.1:$PORT" > /dev/null
  done
  files=(bench/kafka_flink/orders.sql)
  [ "$q" = join ] && files+=(bench/kafka_flink/payments.sql)
  files+=("bench/kafka_flink/$q.sql")
  local vars=(ORDERS_TOPIC="$orders_topic" BOOTSTRAP="127.0.0.1:$PORT" GROUP="bench-$name" FETCH_WAIT_MS="$FETCH_WAIT_MS")
  [ "$q" = join ] && vars+=(PAYMENTS_TOPIC="$payments_topic")
  rm -rf "$work/flink-log" "$work/state"
  mkdir -p "$work/flink-log"
  if [ "$engine" = eddy ]; then
    local sets=()
    for v in "${vars[@]}"; do sets+=(--set "$v"); done
    "$EDDY" run "${files[@]}" "${sets[@]}" --state-dir "$work/state" --checkpoint-interval 10s \
      > >(python3 bench/kafka_latency.py stamp "$work/$name.stamped") 2> "$work/$name.log" &
    engine_pid=$!
    sleep 1
  else
    FLINK_LOG_DIR=$work/flink-log "$FLINK_PYTHON" bench/flink_sql.py live "${vars[@]}" \
      flink:parallelism.default="$FLINK_PARALLELISM" \
      flink:pipeline.jars="$FLINK_KAFKA_JARS" \
      flink:execution.checkpointing.interval=10s \
      flink:state.checkpoints.dir="file://$work/state" \
      flink:execution.buffer-timeout=10ms \
      flink:pipeline.auto-watermark-interval=10ms \
      ${FLINK_OPTIONS:-} \
      -- "${files[@]}" \
      > >(python3 bench/kafka_latency.py stamp "$work/$name.stamped") 2> "$work/$name.log" &
    engine_pid=$!
    until grep -q '^running ' "$work/$name.log"; do
      kill -0 "$engine_pid" 2> /dev/null || { tail -30 "$work/$name.log" >&2; exit 1; }
      sleep 0.1
    done
    # The job runs; its readers take a moment to connect.
    sleep 2
  fi
  started=$(date +%s.%N)
  cpu=$(tree_cpu "$engine_pid")
  if [ "$q" = join ]; then
    feed orders "$orders_topic" $((rate / 2)) &
    local orders_feed=$!
    feed payments "$payments_topic" $((rate / 2))
    wait "$orders_feed"
  else
    feed orders "$orders_topic" "$rate"
  fi
  fed_s=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
  local lag
  if [ "$q" = join ]; then
    lag=$(feed_lag_ms orders $((rate / 2)))
    local payments_lag
    payments_lag=$(feed_lag_ms payments $((rate / 2)))
    [ "$payments_lag" -gt "$lag" ] && lag=$payments_lag
  else
    lag=$(feed_lag_ms orders "$rate")
  fi
  sleep "$DRAIN_S"
  kill -0 "$engine_pid" 2> /dev/null || { echo "$engine stopped by itself:" >&2; tail -30 "$work/$name.log" >&2; exit 1; }
  cpu=$(awk -v a="$cpu" -v b="$(tree_cpu "$engine_pid")" 'BEGIN { printf "%.2f", b - a }')
  if [ "$engine" = eddy ]; then
    kill -INT "$engine_pid"
    wait "$engine_pid" || { tail -20 "$work/$name.log" >&2; exit 1; }
    checkpoints=$(sed -nE 's/^checkpoints: ([0-9]+) taken.*/\1/p' "$work/$name.log")
  else
    signal_tree TERM "$engine_pid"
    wait "$engine_pid" 2> /dev/null || true
    checkpoints=$(cat "$work"/flink-log/*.log 2> /dev/null | grep 'Completed checkpoint [0-9]* for job' | sed -E 's/.*(Completed checkpoint [0-9]+ for job [0-9a-f]+).*/\1/' | sort -u | wc -l)
  fi
  # The stamper ends with the engine's output.
  sleep 0.5
  local pacing=("$work/pacing-orders")
  if [ "$q" = join ]; then
    # When each row was written: the generator writes a row once the
    # latest event time before it is due (its rows are out of order).
    pacing+=("$work/pacing-payments" --written "$work/orders.ndjson" "$work/payments.ndjson")
  fi
  stats=$(python3 bench/kafka_latency.py report "$q" "$work/$name.stamped" "$work/$name.rows" "${pacing[@]}")
  rm -f "$work/$name.stamped"
  printf '%s\t%s\t%s\t{"fed_seconds":%s,"feed_lag_ms":%s,"cpu_seconds":%s,"checkpoints":%s,"stats":%s}\n' \
    "$q" "$rate" "$engine" "$fed_s" "$lag" "$cpu" "${checkpoints:-0}" "$stats" >> "$work/runs.tsv"
  echo "$q at $rate events/s, $engine: fed in $fed_s s (lag $lag ms), cpu $cpu s, checkpoints ${checkpoints:-0}, $stats" >&2
}

command_line="$(for v in PROFILE RATES SECONDS_TO_RUN QUERIES ENGINES PARTITIONS FLINK_PARALLELISM; do [ -z "${!v:-}" ] || printf '%s="%s" ' "$v" "${!v}"; done)bench/kafka_flink.sh"
: > "$work/runs.tsv"
failed=0
for q in $QUERIES; do
  for rate in $RATES; do
    for engine in $ENGINES; do
      live_run "$q" "$rate" "$engine"
    done
    if [ "$ENGINES" = "eddy flink" ]; then
      a="$work/$q-$rate-eddy.rows" b="$work/$q-$rate-flink.rows"
      if python3 bench/compare_outputs.py eddy "$a" flink "$b" > "$work/compare" 2>&1; then
        equal=true
      else
        equal=false
        cat "$work/compare" >&2
      fi
      printf '%s\t%s\tcompare\t{"equal":%s}\n' "$q" "$rate" "$equal" >> "$work/runs.tsv"
      if [ "$equal" = false ]; then
        # A difference counts where both engines kept up; one that fell
        # behind was stopped before its last results.
        if python3 - "$work/runs.tsv" "$q" "$rate" <<'PY'
import json, sys
path, q, rate = sys.argv[1:]
p99 = [json.loads(r[3])["stats"]["p99_ms"] for r in (l.rstrip("\n").split("\t") for l in open(path))
       if r[0] == q and r[1] == rate and r[2] in ("eddy", "flink")]
sys.exit(0 if all(v is not None and v < 1000 for v in p99) else 1)
PY
        then
          echo "FAIL: $q at $rate events/s: the engines' results differ" >&2
          failed=1
        fi
      fi
    fi
  done
done

heading="\`$command_line\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(free -g | awk '/^Mem:/ { print $2 }') GiB, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d); eddy profile $PROFILE; Flink 1.20.0 at parallelism $FLINK_PARALLELISM; $PARTITIONS partitions a topic; $SECONDS_TO_RUN s of events a run; checkpoints every 10 s:"
python3 - "$work/runs.tsv" "$SECONDS_TO_RUN" "$heading" > "$work/table.md" <<'PY'
import json, sys
path, seconds, heading = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = [l.rstrip("\n").split("\t") for l in open(path)]
print(heading)
print()
print("| query | events/s | engine | feed lag | latency p50 | p99 | max | results | CPU s per M events | checkpoints | same results |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
compared = {(r[0], r[1]): json.loads(r[3])["equal"] for r in runs if r[2] == "compare"}
sustained = {}
for q, rate, engine, record in runs:
    if engine == "compare":
        continue
    r = json.loads(record)
    s = r["stats"]
    events = int(rate) * seconds
    lag = r["feed_lag_ms"]
    feed = f"{lag} ms" + (" (behind)" if lag > 1000 else "")
    ms = lambda v: "-" if v is None else f"{v} ms"
    same = compared.get((q, rate))
    print(f"| {q} | {int(rate):,} | {engine} | {feed} | {ms(s['p50_ms'])} | {ms(s['p99_ms'])} | {ms(s['max_ms'])} "
          f"| {s['rows']:,} | {r['cpu_seconds'] / events * 1e6:.2f} | {r['checkpoints']} "
          f"| {'-' if same is None else ('yes' if same else 'no')} |")
    # Sustained: the feed offered the rate and p99 stayed under 1 s.
    if lag <= 1000 and s["p99_ms"] is not None and s["p99_ms"] < 1000:
        sustained[(q, engine)] = max(sustained.get((q, engine), 0), int(rate))
    else:
        sustained.setdefault((q, engine), 0)
print()
print("Highest rate sustained (of those run; the feed offering it, p99 under 1 s): " + "; ".join(
    f"{q} {engine} {rate:,} events/s" if rate else f"{q} {engine} none" for (q, engine), rate in sustained.items()) + ".")
PY
cat "$work/table.md"
if [ -n "${README:-}" ]; then
  readme_section "Sustained load from Kafka" "$work/table.md"
fi
exit $failed
