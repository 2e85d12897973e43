#!/usr/bin/env bash
# Benchmark: the enrichment interval join (payments LEFT JOIN orders on
# order_id within 10 s) over ROWS payments x ROWS orders.
#
# Runs eddy's streaming join and the same join as a DataFusion batch query,
# each in its own process over the same files, and prints events/s (input
# rows of both sides per second), peak resident memory and the ratios.
#
#   bench/join.sh                   # 2,000,000 x 2,000,000 rows, dev profile
#   ROWS=500000 PROFILE=release bench/join.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-2000000}
PROFILE=${PROFILE:-dev}
BATCH=${BATCH:-8192}
if [ "$PROFILE" = dev ]; then
  cargo build -q -p eddy-cli
  EDDY=${CARGO_TARGET_DIR:-target}/debug/eddy
else
  cargo build -q -p eddy-cli --profile "$PROFILE"
  EDDY=${CARGO_TARGET_DIR:-target}/$PROFILE/eddy
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$EDDY" generate --stream orders --rate 1000 --count "$ROWS" > "$work/orders.ndjson"
"$EDDY" generate --stream payments --rate 1000 --count "$ROWS" > "$work/payments.ndjson"
echo "input: $ROWS orders + $ROWS payments; profile $PROFILE; batch size $BATCH"

eddy_json=$("$EDDY" bench join --engine eddy --orders "$work/orders.ndjson" --payments "$work/payments.ndjson" --batch-size "$BATCH")
df_json=$("$EDDY" bench join --engine datafusion --orders "$work/orders.ndjson" --payments "$work/payments.ndjson" --batch-size "$BATCH")
echo "eddy:       $eddy_json"
echo "datafusion: $df_json"

field() { sed -E "s/.*\"$2\":([0-9.]+).*/\1/" <<<"$1"; }
awk -v er="$(field "$eddy_json" rows_per_second)" -v dr="$(field "$df_json" rows_per_second)" \
    -v em="$(field "$eddy_json" peak_rss_bytes)" -v dm="$(field "$df_json" peak_rss_bytes)" \
    -v eo="$(field "$eddy_json" output_rows)" -v do_="$(field "$df_json" output_rows)" 'BEGIN {
  printf "eddy       %12.0f events/s  peak %7.1f MiB\n", er, em / 1048576
  printf "datafusion %12.0f events/s  peak %7.1f MiB\n", dr, dm / 1048576
  printf "ratio eddy/datafusion: throughput %.2fx, peak memory %.2fx\n", er / dr, em / dm
  if (eo != do_) { printf "ERROR: output rows differ (eddy %d, datafusion %d)\n", eo, do_; exit 1 }
}'
