#!/usr/bin/env bash
# Benchmark: the enrichment interval join (payments LEFT JOIN orders on
# order_id within 10 s) over ROWS payments x ROWS orders.
#
# Runs eddy's streaming join and the same join as a DataFusion batch query,
# each in its own process over the same files, and prints events/s (input
# rows of both sides per second), peak resident memory and the ratios.
#
#   bench/join.sh                   # 2,000,000 x 2,000,000 rows, dev profile
#   RUNS=9 PROFILE=release bench/join.sh    # median of 9 alternating runs per engine (default 5)
#   ROWS=500000 PROFILE=release bench/join.sh
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
"$EDDY" generate --stream orders --rate 1000 --count "$ROWS" > "$work/orders.ndjson"
"$EDDY" generate --stream payments --rate 1000 --count "$ROWS" > "$work/payments.ndjson"
echo "input: $ROWS orders + $ROWS payments; profile $PROFILE; batch size ${BATCH:-each engine at its default}"

eddy_run() { "$EDDY" bench join --engine eddy --orders "$work/orders.ndjson" --payments "$work/payments.ndjson" "${batch[@]}"; }
datafusion_run() { "$EDDY" bench join --engine datafusion --orders "$work/orders.ndjson" --payments "$work/payments.ndjson" "${batch[@]}"; }
alternate eddy_run datafusion_run > "$work/medians"
{ read -r eddy_json; read -r df_json; } < "$work/medians"
compare "$eddy_json" "$df_json"
