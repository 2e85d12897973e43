#!/usr/bin/env bash
# Latency: a live feed of RATE events/s (the orders stream, paced to the
# wall clock by `eddy generate --realtime`) piped into a 1 s tumbling count
# per country with a watermark delay of DELAY_MS, for SECONDS seconds. For
# each window result, latency = when the line reached the reader minus when
# the event that completes the window (event time = window end + delay, the
# first that moves the watermark past the end) was due on the wall clock.
# Prints p50, p99 and max over the result lines (the first two seconds'
# windows, warm-up, and the last, closed by the end of input, left out),
# and the target 2 x delay + 50 ms. The feed writes a batch every 50 ms,
# when its latest event is due: up to 50 ms of each figure is the feed's.
#
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/latency.sh
#   EDDY_FLAGS=--no-chaining bench/latency.sh     # flags for `eddy run`
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-100000}
SECONDS_TO_RUN=${SECONDS_TO_RUN:-30}
DELAY_MS=${DELAY_MS:-200}
. bench/lib.sh
build_eddy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat > "$work/window.sql" <<SQL
CREATE TABLE orders (
  order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(order_ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '$DELAY_MS' MILLISECOND
) WITH (connector = 'stdin');
CREATE TABLE counts (country VARCHAR, window_end_ms BIGINT, n BIGINT) WITH (connector = 'stdout', tag = 'W');
INSERT INTO counts
SELECT country, CAST(window_end AS BIGINT), count(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
GROUP BY country, window_start, window_end;
SQL

count=$((RATE * SECONDS_TO_RUN))
echo "feed: $RATE events/s for $SECONDS_TO_RUN s ($count events); 1 s windows, watermark delay $DELAY_MS ms; profile $PROFILE"
"$EDDY" generate --stream orders --rate "$RATE" --count "$count" --realtime 2> "$work/pacing" |
  "$EDDY" run --quiet "$work/window.sql" ${EDDY_FLAGS:-} |
  python3 -c '
import sys, time
for line in sys.stdin:
    sys.stdout.write("%d %s" % (time.time_ns() // 1_000_000, line))
' > "$work/stamped"
python3 - "$work/pacing" "$work/stamped" "$DELAY_MS" <<'PY'
import json, re, sys
pacing, stamped, delay = sys.argv[1], sys.argv[2], int(sys.argv[3])
m = re.search(r"event time (\d+) ms is due at wall clock (\d+) ms", open(pacing).read())
origin, wall = int(m.group(1)), int(m.group(2))
rows = []
for line in open(stamped):
    arrived, rest = line.split(" ", 1)
    rows.append((int(arrived), json.loads(rest.split("> ", 1)[1])["window_end_ms"]))
# The last window closes at the end of input (+inf watermark), not by an event,
# and the first two seconds are warm-up (the job starts while the feed already
# runs): both left out.
last_end = max(end for _, end in rows)
lat = sorted(arrived - (wall + end + delay - origin) for arrived, end in rows
             if end != last_end and end - origin > 2000)
pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
print(f"{len(lat)} result rows: latency p50 {pick(0.50)} ms, p99 {pick(0.99)} ms, max {lat[-1]} ms; target 2 x {delay} + 50 = {2 * delay + 50} ms")
PY
