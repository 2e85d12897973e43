#!/usr/bin/env bash
# Kafka throughput. EVENTS generated payments are written into a topic of
# PARTITIONS partitions keyed by order_id (by eddy itself: a file source
# into a Kafka sink), then the tumbling 10 s count/sum per order_id reads
# them: from the NDJSON file (the baseline), from the topic in one process,
# and from the topic in two processes of one consumer group (--group, one
# task per partition). Then the same window per method (not the topic's
# key) from the file and from the topic in two processes, which moves the
# rows through an exchange topic keyed by method. Every run reads to the end and finishes; their
# outputs must be equal. Prints wall time and events/s of the whole
# run, the ratio to the file run, and the group's start-up time (a group
# run over an empty topic, measured in the same command). The broker is
# scripts/kafka-broker.sh's (in memory, on this machine, sharing its cores).
#
#   bench/kafka.sh                                        # 1,000,000 events, 2 partitions, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/kafka.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-1000000}
PARTITIONS=${PARTITIONS:-2}
PORT=${PORT:-19192}
. bench/lib.sh
build_eddy
broker=$(scripts/kafka-broker.sh path)

work=$(mktemp -d)
"$broker" broker --listener-url "tcp://127.0.0.1:$PORT" --advertised-listener-url "tcp://127.0.0.1:$PORT" \
  >"$work/broker.log" 2>&1 &
broker_pid=$!
trap 'kill $broker_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
for topic in payments empty; do
  "$broker" topic create "$topic" --partitions "$PARTITIONS" --broker "tcp://127.0.0.1:$PORT" >/dev/null
done

"$EDDY" generate --stream payments --rate 1000 --count "$EVENTS" > "$work/payments.ndjson"
echo "input: $EVENTS payments; topic of $PARTITIONS partitions keyed by order_id; profile $PROFILE"

columns="payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL, method VARCHAR"
cat > "$work/load.sql" <<SQL
CREATE TABLE payments_file ($columns) WITH (connector = 'file', path = '$work/payments.ndjson');
CREATE TABLE payments_topic ($columns) WITH (connector = 'kafka', bootstrap_servers = '127.0.0.1:$PORT',
  topic = 'payments', key_column = 'order_id', delivery = 'at_least_once');
INSERT INTO payments_topic SELECT * FROM payments_file;
SQL
now() { date +%s.%N; }
start=$(now)
"$EDDY" run --quiet "$work/load.sql"
end=$(now)
awk -v s="$start" -v e="$end" -v n="$EVENTS" 'BEGIN { printf "%-22s %7.2f s  %10.0f events/s\n", "write (file -> kafka)", e - s, n / (e - s) }'

# window_job NAME SOURCE-OPTIONS [KEY]: the query (per KEY, default
# order_id), writing $work/out-NAME/totals*.ndjson
window_job() {
  local key=${3:-order_id}
  mkdir -p "$work/out-$1"
  cat > "$work/$1.sql" <<SQL
CREATE TABLE payments ($columns,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH ($2);
CREATE TABLE totals ($key VARCHAR, window_start TIMESTAMP, payments BIGINT, amount DOUBLE)
  WITH (connector = 'ndjson', path = '$work/out-$1/totals.ndjson');
INSERT INTO totals
SELECT $key, window_start, count(*), round(sum(paid_amount), 2)
FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY $key, window_start, window_end;
SQL
}
kafka="connector = 'kafka', bootstrap_servers = '127.0.0.1:$PORT', stop = 'latest', key_column = 'order_id'"
window_job file "connector = 'file', path = '$work/payments.ndjson'"
window_job kafka "$kafka, topic = 'payments'"
window_job group "$kafka, topic = 'payments'"
window_job empty "$kafka, topic = 'empty'"
window_job file_method "connector = 'file', path = '$work/payments.ndjson'" method
window_job exchange "$kafka, topic = 'payments'" method

timed() { # NAME COMMAND...: runs, prints, records the time
  local name=$1; shift
  local start end
  start=$(now); "$@"; end=$(now)
  awk -v s="$start" -v e="$end" 'BEGIN { print e - s }' > "$work/time-$name"
}
group_run() { # NAME: two processes of one group
  "$EDDY" run --quiet "$work/$1.sql" --group "$1" --state-dir "$work/state-$1" --checkpoint-interval 1s &
  local first=$!
  "$EDDY" run --quiet "$work/$1.sql" --group "$1" --state-dir "$work/state-$1" --checkpoint-interval 1s
  wait "$first"
}
timed file "$EDDY" run --quiet "$work/file.sql"
timed kafka "$EDDY" run --quiet "$work/kafka.sql"
timed group group_run group
timed empty group_run empty
timed file_method "$EDDY" run --quiet "$work/file_method.sql"
timed exchange group_run exchange
file_time=$(cat "$work/time-file")
for name in file kafka group; do
  label=$name
  [ "$name" = kafka ] && label="kafka, 1 process"
  [ "$name" = group ] && label="kafka, 2 processes"
  awk -v l="$label" -v t="$(cat "$work/time-$name")" -v f="$file_time" -v n="$EVENTS" \
    'BEGIN { printf "%-22s %7.2f s  %10.0f events/s  %.2fx the file run\n", l, t, n / t, f / t }'
done
awk -v t="$(cat "$work/time-file_method")" -v n="$EVENTS" \
  'BEGIN { printf "%-22s %7.2f s  %10.0f events/s\n", "per method, file", t, n / t }'
awk -v t="$(cat "$work/time-exchange")" -v f="$(cat "$work/time-file_method")" -v n="$EVENTS" \
  'BEGIN { printf "%-22s %7.2f s  %10.0f events/s  %.2fx the file run (2 processes, through an exchange topic)\n", "per method, kafka", t, n / t, f / t }'
awk -v t="$(cat "$work/time-empty")" 'BEGIN { printf "%-22s %7.2f s  (joining the group, rebalancing, finding the end: in the 2-process time)\n", "group start-up", t }'
sorted() { cat "$work/out-$1"/totals*.ndjson | sort; }
for name in kafka group; do
  if ! cmp -s <(sorted file) <(sorted "$name"); then
    echo "ERROR: the $name run's output differs from the file run's" >&2
    exit 1
  fi
done
if ! cmp -s <(sorted file_method) <(sorted exchange); then
  echo "ERROR: the exchange run's output differs from the file run's" >&2
  exit 1
fi
echo "outputs: equal ($(sorted file | wc -l) rows per order_id, $(sorted file_method | wc -l) per method)"
