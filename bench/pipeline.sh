#!/usr/bin/env bash
# The whole reference pipeline (queries/, all eight stages) over EVENTS
# generated events read from NDJSON files (35% orders, 35% payments, 30%
# device events), against DataFusion batch running the stages a batch
# engine can express over the same files (`eddy bench pipeline`: the
# enrichment join, the payment metrics and the device metrics; the anomaly
# rules' running statistics, the late-event report and the health checks
# have no batch form). eddy's figure is its whole process, writing every
# tagged line to a file; DataFusion's is its queries' time, writing each
# stage's rows as an NDJSON file (`write_json`).
# Prints events/s, peak memory, the ratio, and fails when the three shared
# outputs' row counts differ.
#
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/pipeline.sh   # 10M events
#   EVENTS=1000000 PARALLELISM=2 bench/pipeline.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
PARALLELISM=${PARALLELISM:-1}
. bench/lib.sh
build_eddy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

orders=$((EVENTS * 35 / 100))
payments=$((EVENTS * 35 / 100))
devices=$((EVENTS - orders - payments))
"$EDDY" generate --stream orders --rate 1000 --count "$orders" > "$work/orders.ndjson"
"$EDDY" generate --stream payments --rate 1000 --count "$payments" > "$work/payments.ndjson"
"$EDDY" generate --stream devices --rate 1000 --count "$devices" > "$work/devices.ndjson"
echo "input: $orders orders, $payments payments, $devices device events ($(du -ch "$work"/*.ndjson | tail -1 | cut -f1) of NDJSON); profile $PROFILE; parallelism $PARALLELISM"

df_json=$("$EDDY" bench pipeline --engine datafusion --orders "$work/orders.ndjson" \
  --payments "$work/payments.ndjson" --devices "$work/devices.ndjson" --output "$work/datafusion")
echo "datafusion (stages 10-30): $df_json"

/usr/bin/time -f "%M %e" -o "$work/time" "$EDDY" run queries/ --parallelism "$PARALLELISM" \
  --input orders="$work/orders.ndjson" --input payments="$work/payments.ndjson" \
  --input devices="$work/devices.ndjson" > "$work/out.txt" 2> "$work/summary.txt"
read -r kb seconds < "$work/time"
echo "eddy (all stages): $(wc -l < "$work/out.txt") tagged lines; sinks:"
grep '^sink ' "$work/summary.txt" | sed 's/^/  /'

status=0
for sink in enriched_payments payment_metrics device_metrics; do
  eddy_rows=$(sed -nE "s/^sink $sink: ([0-9]+) rows written/\1/p" "$work/summary.txt")
  df_rows=$(sed -E "s/.*\"$sink\":([0-9]+).*/\1/" <<<"$df_json")
  if [ "$eddy_rows" != "$df_rows" ]; then
    echo "ERROR: $sink: eddy wrote $eddy_rows rows, DataFusion $df_rows"
    status=1
  fi
done

awk -v n="$EVENTS" -v s="$seconds" -v kb="$kb" \
    -v dr="$(field "$df_json" rows_per_second)" -v dm="$(field "$df_json" peak_rss_bytes)" 'BEGIN {
  er = n / s
  printf "eddy, all 8 stages       %12.0f events/s  peak %7.1f MiB  (%.2f s)\n", er, kb / 1024, s
  printf "datafusion, stages 10-30 %12.0f events/s  peak %7.1f MiB\n", dr, dm / 1048576
  printf "ratio eddy/datafusion: throughput %.2fx, peak memory %.2fx\n", er / dr, kb * 1024 / dm
}'
exit $status
