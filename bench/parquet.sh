#!/usr/bin/env bash
# Parquet writing: the reference pipeline's enrichment (sources + the
# payments/orders interval join) over EVENTS generated events (half orders,
# half payments), its enriched stream written once as NDJSON and once as
# Parquet (zstd) with --output, in one command. Prints per format the
# wall time, rows written, rows/s and bytes/s of output, and the output
# size; then the Parquet/NDJSON size ratio.
#
#   bench/parquet.sh                                      # 10,000,000 events, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/parquet.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
. bench/lib.sh
build_eddy

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
enrichment_input "$work"

for format in ndjson parquet; do
  out="$work/out-$format"
  start=$(date +%s.%N)
  summary=$("$EDDY" run queries/00_sources.sql queries/10_enrichment.sql \
    --input "orders=$work/orders.ndjson" --input "payments=$work/payments.ndjson" \
    --output "$out" --format "$format" 2>&1 >/dev/null)
  end=$(date +%s.%N)
  rows=$(sed -n 's/^sink enriched_payments: \([0-9]*\) rows written.*/\1/p' <<<"$summary")
  bytes=$(du -sb "$out" | cut -f1)
  awk -v f="$format" -v s="$start" -v e="$end" -v r="$rows" -v b="$bytes" 'BEGIN {
    t = e - s
    printf "%-8s %7.2f s  %10d rows  %10.0f rows/s  %7.1f MiB/s  %8.1f MiB\n", f, t, r, r / t, b / t / 1048576, b / 1048576
  }'
  echo "$bytes" > "$work/bytes-$format"
done
awk -v p="$(cat "$work/bytes-parquet")" -v n="$(cat "$work/bytes-ndjson")" \
  'BEGIN { printf "parquet size / ndjson size: %.3f\n", p / n }'
