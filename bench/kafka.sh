#!/usr/bin/env bash
# Kafka throughput: EVENTS generated payments are written into a topic of
# PARTITIONS partitions (by eddy itself: a file source into a Kafka sink,
# keyed by order_id), then the tumbling 10 s count/sum per customer...
# per method reads the topic to its end (`stop = 'latest'`), and, as the
# baseline in the same command, the same query reads the same rows from the
# NDJSON file. Prints the write rate and, per input, wall time and events/s
# of the whole process, and the Kafka/file ratio. The broker is
# scripts/kafka-broker.sh's (in-memory, on this machine).
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
"$broker" topic create payments --partitions "$PARTITIONS" --broker "tcp://127.0.0.1:$PORT" >/dev/null

"$EDDY" generate --stream payments --rate 1000 --count "$EVENTS" > "$work/payments.ndjson"
echo "input: $EVENTS payments, topic of $PARTITIONS partitions; profile $PROFILE"

columns="payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL, method VARCHAR"
cat > "$work/load.sql" <<SQL
CREATE TABLE payments_file ($columns) WITH (connector = 'file', path = '$work/payments.ndjson');
CREATE TABLE payments_topic ($columns) WITH (connector = 'kafka', bootstrap_servers = '127.0.0.1:$PORT',
  topic = 'payments', key_column = 'order_id', delivery = 'at_least_once');
INSERT INTO payments_topic SELECT * FROM payments_file;
SQL
start=$(date +%s.%N)
"$EDDY" run --quiet "$work/load.sql"
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v n="$EVENTS" 'BEGIN { printf "write   %7.2f s  %10.0f events/s (file -> kafka sink)\n", e - s, n / (e - s) }'

window_job() {
  cat <<SQL
CREATE TABLE payments ($columns,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH ($1);
CREATE TABLE totals (method VARCHAR, window_start TIMESTAMP, payments BIGINT, amount DOUBLE)
  WITH (connector = 'ndjson', path = '$work/totals-$2.ndjson');
INSERT INTO totals
SELECT method, window_start, count(*), sum(paid_amount)
FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY method, window_start, window_end;
SQL
}
window_job "connector = 'kafka', bootstrap_servers = '127.0.0.1:$PORT', topic = 'payments', stop = 'latest'" kafka > "$work/kafka.sql"
window_job "connector = 'file', path = '$work/payments.ndjson'" file > "$work/file.sql"
for input in file kafka; do
  start=$(date +%s.%N)
  "$EDDY" run --quiet "$work/$input.sql"
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { print e - s }' > "$work/time-$input"
  awk -v i="$input" -v s="$start" -v e="$end" -v n="$EVENTS" 'BEGIN { printf "%-7s %7.2f s  %10.0f events/s (window query, whole process)\n", i, e - s, n / (e - s) }'
done
if ! cmp -s <(sort "$work/totals-file.ndjson") <(sort "$work/totals-kafka.ndjson"); then
  echo "ERROR: the window query's output from Kafka differs from the file's" >&2
  exit 1
fi
awk -v k="$(cat "$work/time-kafka")" -v f="$(cat "$work/time-file")" \
  'BEGIN { printf "kafka / file events/s: %.2fx (same output rows)\n", f / k }'
