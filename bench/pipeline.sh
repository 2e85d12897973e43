#!/usr/bin/env bash
# The whole reference pipeline (queries/, all eight stages) over EVENTS
# generated events read from NDJSON files (35% orders, 35% payments, 30%
# device events), against DataFusion batch running the stages a batch
# engine can express over the same files (`eddy bench pipeline`: the
# enrichment join, the payment metrics and the device metrics; the anomaly
# rules' running statistics, the late-event report and the health checks
# have no batch form). eddy's figure is its whole process at its default
# flags (PARALLELISM sets instances), writing every tagged line to a file;
# DataFusion's is its queries' time, writing each stage's rows as an
# NDJSON file (`write_json`). The two run in turn RUNS times (default 5);
# prints medians (min-max), peak memory and the ratio, and fails when the
# three shared outputs differ: by value in the first run
# (bench/compare_outputs.py: the rows sorted, floats within 1e-9), by row
# count in every run.
#
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/pipeline.sh   # 10M events
#   EVENTS=1000000 RUNS=3 PARALLELISM=1 bench/pipeline.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
RUNS=${RUNS:-5}
. bench/lib.sh
[ -n "${PARALLELISM:-}" ] || unset EDDY_PARALLELISM
build_eddy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

orders=$((EVENTS * 35 / 100))
payments=$((EVENTS * 35 / 100))
devices=$((EVENTS - orders - payments))
"$EDDY" generate --stream orders --rate 1000 --count "$orders" > "$work/orders.ndjson"
"$EDDY" generate --stream payments --rate 1000 --count "$payments" > "$work/payments.ndjson"
"$EDDY" generate --stream devices --rate 1000 --count "$devices" > "$work/devices.ndjson"
echo "input: $orders orders, $payments payments, $devices device events ($(du -ch "$work"/*.ndjson | tail -1 | cut -f1) of NDJSON); profile $PROFILE; eddy at ${PARALLELISM:-its default} instance(s) per keyed operator; $RUNS alternating runs; $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

status=0
for ((run = 1; run <= RUNS; run++)); do
  rm -rf "$work/datafusion"
  df_json=$("$EDDY" bench pipeline --engine datafusion --orders "$work/orders.ndjson" \
    --payments "$work/payments.ndjson" --devices "$work/devices.ndjson" --output "$work/datafusion")
  echo "datafusion (stages 10-30), run $run: $df_json" >&2
  /usr/bin/time -f "%M %e" -o "$work/time" "$EDDY" run queries/ \
    --input orders="$work/orders.ndjson" --input payments="$work/payments.ndjson" \
    --input devices="$work/devices.ndjson" > "$work/out.txt" 2> "$work/summary.txt"
  read -r kb seconds < "$work/time"
  echo "eddy (all stages), run $run: $seconds s, $kb KiB, $(wc -l < "$work/out.txt") tagged lines" >&2
  for sink_tag in enriched_payments:ENRICHED payment_metrics:METRICS device_metrics:DEVICE_METRICS; do
    sink=${sink_tag%:*}
    if [ "$run" = 1 ]; then
      # The first run's rows compared by value (every run writes the same).
      if ! python3 bench/compare_outputs.py --tag "${sink_tag#*:}" eddy "$work/out.txt" \
        datafusion "$work/datafusion/$sink.ndjson" > "$work/compared" 2> "$work/differences"; then
        echo "ERROR: $sink: eddy's and DataFusion's rows differ: $(cat "$work/compared")"
        cat "$work/differences"
        status=1
      fi
      echo "$sink by value: $(cat "$work/compared")" >&2
    fi
    eddy_rows=$(sed -nE "s/^sink $sink: ([0-9]+) rows written/\1/p" "$work/summary.txt")
    df_rows=$(sed -E "s/.*\"$sink\":([0-9]+).*/\1/" <<<"$df_json")
    if [ "$eddy_rows" != "$df_rows" ]; then
      echo "ERROR: $sink: eddy wrote $eddy_rows rows, DataFusion $df_rows"
      status=1
    fi
  done
  echo "eddy $seconds $kb" >> "$work/runs"
  echo "datafusion $(field "$df_json" seconds) $(($(field "$df_json" peak_rss_bytes) / 1024))" >> "$work/runs"
done
grep '^sink ' "$work/summary.txt" | sed 's/^/eddy /'

awk -v n="$EVENTS" '
  { s[$1] = s[$1] " " $2; m[$1] = m[$1] " " $3 }
  function median(list,   v, k, i, j, t) {
    k = split(list, v, " ")
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    lo = v[1]; hi = v[k]
    return v[int((k + 1) / 2)]
  }
  END {
    es = median(s["eddy"]); elo = lo; ehi = hi; em = median(m["eddy"])
    ds = median(s["datafusion"]); dlo = lo; dhi = hi; dm = median(m["datafusion"])
    printf "| engine | events/s, median (min-max) | seconds | peak RSS MiB |\n|---|---|---|---|\n"
    printf "| eddy, all 8 stages | %.2fM (%.2fM-%.2fM) | %.2f | %.0f |\n", n / es / 1e6, n / ehi / 1e6, n / elo / 1e6, es, em / 1024
    printf "| DataFusion, stages 10-30 | %.2fM (%.2fM-%.2fM) | %.2f | %.0f |\n", n / ds / 1e6, n / dhi / 1e6, n / dlo / 1e6, ds, dm / 1024
    printf "\neddy / DataFusion: %.2fx events/s\n", ds / es
  }' "$work/runs"
exit $status
