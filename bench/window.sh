#!/usr/bin/env bash
# Benchmark: tumbling 10 s count/sum per key over ROWS NDJSON order rows.
#
# Runs eddy's streaming engine and the same aggregation as a DataFusion batch
# query, each in its own process over the same file, and prints events/s,
# peak resident memory and the eddy/DataFusion ratios.
#
#   bench/window.sh                 # 2,000,000 rows, dev profile
#   RUNS=9 PROFILE=release bench/window.sh    # median of 9 alternating runs per engine (default 5)
#   ROWS=500000 PROFILE=release bench/window.sh
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

eddy_run() { "$EDDY" bench window --engine eddy --input "$data" "${batch[@]}"; }
datafusion_run() { "$EDDY" bench window --engine datafusion --input "$data" "${batch[@]}"; }
alternate eddy_run datafusion_run > "$work/medians"
{ read -r eddy_json; read -r df_json; } < "$work/medians"
compare "$eddy_json" "$df_json"
