#!/usr/bin/env bash
# eddy vs Apache Flink 1.20, side by side on the same generated NDJSON:
# the window (tumbling 10 s count/sum per customer), hop (5 s every 1 s)
# and join (payments LEFT JOIN orders within +-10 s) queries of
# `eddy bench`, and the updating queries of bench/updating/ (group: count
# and sum per customer without a window; left_join: payments LEFT JOIN
# orders without a time bound), Flink at parallelism 1 and 2. Flink runs
# the updating aggregate in its best form, mini-batch with local-global
# aggregation (1 s, 5000 rows). Flink is PyFlink from PyPI
# (apache-flink==1.20.0, in a virtual environment of its own that this
# script creates) on Java 17 (Debian's openjdk-17-jre-headless, which the
# script installs if missing). Flink's figure is its job's net runtime
# (JVM start and planning left out); eddy's is the whole process. Prints
# events/s, peak memory and the ratios.
#
#   bench/flink.sh                                      # 2,000,000 rows, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/flink.sh
#   QUERIES="group left_join" FLINK_HEAP=6g bench/flink.sh   # Flink's heap (default 1g)
#   (the updating queries run eddy EDDY_RUNS times, default 5: the median)
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-2000000}
QUERIES=${QUERIES:-window hop join}
. bench/lib.sh
build_eddy

flink_env

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$EDDY" generate --stream orders --rate 1000 --count "$ROWS" > "$work/orders.ndjson"
"$EDDY" generate --stream payments --rate 1000 --count "$ROWS" > "$work/payments.ndjson"
echo "input: $ROWS orders, $ROWS payments (join: both); profile $PROFILE; $(nproc) cores"

flink() { # QUERY PARALLELISM: one JSON line
  JVM_ARGS=-Xmx${FLINK_HEAP:-1g} "$FLINK_PYTHON" bench/flink_job.py "$1" "$2" \
    "$work/orders.ndjson" "$work/payments.ndjson" 2>"$work/flink-$1-$2.log" | tail -1
}

# One updating query's eddy runs at EDDY_PARALLELISM=$1: EDDY_RUNS runs
# (default 5), the median wall time and its run's peak, as JSON.
eddy_updating() {
  # A JVM of the Flink runs before still exiting would share the cores.
  while pgrep -x java > /dev/null; do sleep 1; done
  : > "$work/times"
  for _ in $(seq "${EDDY_RUNS:-5}"); do
    EDDY_PARALLELISM=$1 /usr/bin/time -f "%e %M" -o "$work/time" "$EDDY" run --quiet "bench/updating/$q.sql" "${inputs[@]}" \
      > /dev/null 2>"$work/eddy-$q.log" || { cat "$work/eddy-$q.log" >&2; exit 1; }
    cat "$work/time" >> "$work/times"
  done
  read -r wall peak_kb < <(sort -n "$work/times" | awk '{ w[NR] = $1; m[NR] = $2 } END { i = int((NR + 1) / 2); print w[i], m[i] }')
  echo "$q: eddy p$1 $(wc -l < "$work/times") runs, wall $(sort -n "$work/times" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }') s, median $wall s" >&2
  awk -v n="$events" -v w="$wall" -v m="$peak_kb" 'BEGIN {
    printf "{\"rows_per_second\":%.0f,\"peak_rss_bytes\":%d}", n / w, m * 1024 }'
}

# eddy p1 is compared with Flink p1, eddy p2 with Flink p2 (`eddy bench`,
# which runs the window, hop and join queries, has one figure for both).
printf "%-9s %12s %12s %6s %12s %12s %6s %22s\n" query "eddy p1" "flink p1" ratio "eddy p2" "flink p2" ratio "peak MiB e1/f1/e2/f2"
for q in $QUERIES; do
  if [ "$q" = join ]; then
    e1=$("$EDDY" bench join --engine eddy --orders "$work/orders.ndjson" --payments "$work/payments.ndjson")
    e2=$e1
  elif [ "$q" = group ] || [ "$q" = left_join ]; then
    # Updating queries: `eddy run` of bench/updating/$q.sql, the whole
    # process timed (start-up and planning included).
    events=$ROWS
    inputs=(--set "INPUT=$work/orders.ndjson")
    if [ "$q" = left_join ]; then
      events=$((2 * ROWS))
      inputs=(--set "ORDERS=$work/orders.ndjson" --set "PAYMENTS=$work/payments.ndjson")
    fi
    e1=$(eddy_updating 1) || exit 1
    e2=$(eddy_updating 2) || exit 1
  else
    e1=$("$EDDY" bench "$q" --engine eddy --input "$work/orders.ndjson")
    e2=$e1
  fi
  f1=$(flink "$q" 1) || { cat "$work/flink-$q-1.log" >&2; exit 1; }
  f2=$(flink "$q" 2) || { cat "$work/flink-$q-2.log" >&2; exit 1; }
  awk -v q="$q" -v e="$(field "$e1" rows_per_second)" -v em="$(field "$e1" peak_rss_bytes)" \
      -v d="$(field "$e2" rows_per_second)" -v dm="$(field "$e2" peak_rss_bytes)" \
      -v a="$(field "$f1" rows_per_second)" -v am="$(field "$f1" peak_rss_bytes)" \
      -v b="$(field "$f2" rows_per_second)" -v bm="$(field "$f2" peak_rss_bytes)" 'BEGIN {
    printf "%-9s %12.0f %12.0f %5.1fx %12.0f %12.0f %5.1fx %5.0f/%.0f/%.0f/%.0f\n", q, e, a, e / a, d, b, d / b, em / 1048576, am / 1048576, dm / 1048576, bm / 1048576
  }'
done
