#!/usr/bin/env bash
# Memory: OVER aggregates keep state per key, not per event.
#
# Runs the amount rule's running statistics (dynamic_threshold and a running
# count per customer, OVER ... ORDER BY event time) over SMALL and BIG order
# streams with the same 100,000 customers, and prints each run's peak
# resident memory. State bounded by the number of keys means the two peaks
# are close although BIG has ten times the events.
#
#   bench/over_state.sh              # 1M and 10M events, 100k customers
set -euo pipefail
cd "$(dirname "$0")/.."

SMALL=${SMALL:-1000000}
BIG=${BIG:-10000000}
. bench/lib.sh
build_eddy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/over.sql" <<'SQL'
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'stdin');
CREATE TABLE out (customer_id VARCHAR, threshold DOUBLE, n BIGINT) WITH (connector = 'blackhole');
INSERT INTO out
SELECT customer_id,
       dynamic_threshold(order_amount, 3.0, 5000.0, 5) OVER (PARTITION BY customer_id ORDER BY event_time
         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
       count(*) OVER (PARTITION BY customer_id ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
FROM orders;
SQL

for rows in "$SMALL" "$BIG"; do
  # rate 50000 events/s gives 100,000 background customers.
  "$EDDY" generate --stream orders --rate 50000 --count "$rows" > "$work/orders.ndjson"
  /usr/bin/time -f "%M %e" -o "$work/time" "$EDDY" run --quiet --input orders="$work/orders.ndjson" "$work/over.sql"
  read -r kb seconds < "$work/time"
  printf "%10d events, 100000 customers: peak %7.1f MiB, %6.2f s, %10.0f events/s\n" \
    "$rows" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')" "$seconds" "$(awk -v r="$rows" -v s="$seconds" 'BEGIN { print r / s }')"
done
