#!/usr/bin/env bash
# Benchmark: hopping windows (5 s every 1 s, count/sum per key: each row in
# five windows) against the same aggregation as a DataFusion batch query
# (each row's five window starts unnested), and eddy's own tumbling-window
# query on the same file for scale: sliced hop windows fold each row once,
# so a hop should cost about what a tumble costs.
#
#   bench/hop.sh                    # 2,000,000 rows, dev profile
#   PROFILE=release CARGO_TARGET_DIR=$HOME/.cache/eddy-release bench/hop.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-2000000}
# Each engine at its own default batch size (eddy 2048, DataFusion 8192)
# unless BATCH sets one for both.
batch=(${BATCH:+--batch-size "$BATCH"})
. bench/lib.sh
build_eddy

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data="$work/orders.ndjson"
"$EDDY" generate --stream orders --rate 1000 --count "$ROWS" > "$data"
echo "input: $ROWS rows, $(du -h "$data" | cut -f1) of NDJSON; profile $PROFILE; batch size ${BATCH:-each engine at its default}"

eddy_run() { "$EDDY" bench hop --engine eddy --input "$data" "${batch[@]}"; }
datafusion_run() { "$EDDY" bench hop --engine datafusion --input "$data" "${batch[@]}"; }
alternate eddy_run datafusion_run > "$work/medians"
{ read -r eddy_json; read -r df_json; } < "$work/medians"
compare "$eddy_json" "$df_json"
tumble_json=$("$EDDY" bench window --engine eddy --input "$data" "${batch[@]}")
echo "eddy tumble: $tumble_json"
awk -v h="$(field "$eddy_json" rows_per_second)" -v t="$(field "$tumble_json" rows_per_second)" \
  'BEGIN { printf "eddy hop / eddy tumble: %.2fx events/s\n", h / t }'
