#!/usr/bin/env bash
# Memory over long streams: peak resident memory of the window query
# (tumbling 10 s count/sum per customer) and the OVER query (the amount
# rule's running statistics per customer) at SMALL and BIG events. The
# orders stream at 50,000 events/s of event time has 100,000
# customers; state is bounded by keys (and open windows), so a stream five
# times as long should peak at about the same memory. The generator's
# NDJSON is piped into the job's stdin (no files: 50M events would be ~7 GB);
# the peak is the job process's alone. Prints per query and size the peak,
# the time (the generator, which takes ~5 s to set up 100,000 customers and
# then writes NDJSON on one core, sets the pace: this is not a throughput
# benchmark) and the BIG/SMALL peak ratio.
#
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/memory.sh   # 10M and 50M events
set -euo pipefail
cd "$(dirname "$0")/.."

SMALL=${SMALL:-10000000}
BIG=${BIG:-50000000}
. bench/lib.sh
build_eddy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

source_table() {
  cat <<SQL
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'stdin');
SQL
}
window_query() {
  source_table "$1"
  cat <<'SQL'
CREATE TABLE out (customer_id VARCHAR, window_start TIMESTAMP, n BIGINT, total DOUBLE) WITH (connector = 'blackhole');
INSERT INTO out
SELECT customer_id, window_start, count(*), sum(order_amount)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
GROUP BY customer_id, window_start, window_end;
SQL
}
over_query() {
  source_table "$1"
  cat <<'SQL'
CREATE TABLE out (customer_id VARCHAR, threshold DOUBLE, n BIGINT) WITH (connector = 'blackhole');
INSERT INTO out
SELECT customer_id,
       dynamic_threshold(order_amount, 3.0, 5000.0, 5) OVER (PARTITION BY customer_id ORDER BY event_time
         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
       count(*) OVER (PARTITION BY customer_id ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
FROM orders;
SQL
}

echo "profile $PROFILE; orders from the generator, 100,000 customers"
for query in window over; do
  for rows in "$SMALL" "$BIG"; do
    "${query}_query" "$rows" > "$work/$query.sql"
    "$EDDY" generate --stream orders --rate 50000 --count "$rows" |
      /usr/bin/time -f "%M %e" -o "$work/time" "$EDDY" run --quiet "$work/$query.sql"
    read -r kb seconds < "$work/time"
    echo "$kb" > "$work/peak-$query-$rows"
    printf "%-6s %10d events: peak %7.1f MiB, %7.2f s, %10.0f events/s\n" "$query" "$rows" \
      "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')" "$seconds" "$(awk -v r="$rows" -v s="$seconds" 'BEGIN { print r / s }')"
  done
  awk -v s="$(cat "$work/peak-$query-$SMALL")" -v b="$(cat "$work/peak-$query-$BIG")" -v q="$query" \
    'BEGIN { printf "%-6s peak at %d events / peak at %d events: %.2f\n", q, '"$BIG"', '"$SMALL"', b / s }'
done
