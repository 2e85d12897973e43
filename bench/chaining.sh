#!/usr/bin/env bash
# Operator chaining on and off, measured in the same run with the same
# binary (`--no-chaining` runs every node as a task of its own):
#
# - the window, hop and join benchmarks (`eddy bench NAME --engine eddy`,
#   ROWS rows; the join reads ROWS orders and ROWS payments), chained and
#   unchained runs alternating;
# - the whole reference pipeline over files (`eddy run queries/`, EVENTS
#   events as bench/pipeline.sh makes them, every tagged line written to a
#   file); the two runs' outputs must be the same lines;
# - the threads a live reference pipeline holds on its built-in generator
#   (`eddy run queries/`, sampled from /proc for LIVE_SECONDS).
#
# Prints, per benchmark, events/s as the median (min-max) of RUNS runs each,
# and chained / unchained. Fails when the pipeline's outputs differ.
#
# With EDDY_BEFORE (an earlier eddy binary) the second column is that
# binary instead of --no-chaining, run the same way: before and after a
# change, in one run (the worker pool was measured so).
#
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/chaining.sh
#   EDDY_BEFORE=/path/to/older/eddy bench/chaining.sh
#   ROWS=200000 EVENTS=200000 RUNS=1 LIVE_SECONDS=2 bench/chaining.sh    # seconds
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-2000000}
EVENTS=${EVENTS:-2000000}
RUNS=${RUNS:-5}
LIVE_SECONDS=${LIVE_SECONDS:-5}
. bench/lib.sh
build_eddy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$EDDY" generate --stream orders --rate 1000 --count "$ROWS" > "$work/orders.ndjson"
"$EDDY" generate --stream payments --rate 1000 --count "$ROWS" > "$work/payments.ndjson"
p_orders=$((EVENTS * 35 / 100))
p_payments=$((EVENTS * 35 / 100))
p_devices=$((EVENTS - p_orders - p_payments))
mkdir "$work/p"
"$EDDY" generate --stream orders --rate 1000 --count "$p_orders" > "$work/p/orders.ndjson"
"$EDDY" generate --stream payments --rate 1000 --count "$p_payments" > "$work/p/payments.ndjson"
"$EDDY" generate --stream devices --rate 1000 --count "$p_devices" > "$work/p/devices.ndjson"
echo "input: $ROWS rows per benchmark file, $EVENTS pipeline events; profile $PROFILE; parallelism $EDDY_PARALLELISM; $RUNS runs each; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $(nproc) cores"

# The two ways compared: this eddy chained and unchained, or this eddy
# ("after") and EDDY_BEFORE ("before").
if [ -n "${EDDY_BEFORE:-}" ]; then
  a_label=after b_label=before b_bin=$EDDY_BEFORE b_flags=()
else
  a_label=chained b_label=unchained b_bin=$EDDY b_flags=(--no-chaining)
fi

# events/s of one `eddy bench` run by binary $1.
bench_run() {
  local bin=$1 name=$2
  shift 2
  local json
  case $name in
    join) json=$("$bin" bench join --engine eddy --orders "$work/orders.ndjson" --payments "$work/payments.ndjson" "$@") ;;
    *) json=$("$bin" bench "$name" --engine eddy --input "$work/orders.ndjson" "$@") ;;
  esac
  field "$json" rows_per_second
}

# events/s of one reference-pipeline run by binary $1; its output lands
# in $work/$2.out.
pipeline_run() {
  local bin=$1 out=$2
  shift 2
  local start end
  start=$(date +%s.%N)
  "$bin" run queries/ --quiet --input orders="$work/p/orders.ndjson" \
    --input payments="$work/p/payments.ndjson" --input devices="$work/p/devices.ndjson" "$@" > "$work/$out.out"
  end=$(date +%s.%N)
  awk -v e="$EVENTS" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f\n", e / (b - a) }'
}

# "median (min-max)" of the numbers on stdin, and the median alone in $2's file.
summary() {
  sort -g | awk -v file="$1" '{ v[NR] = $1 } END {
    m = v[int((NR + 1) / 2)]; print m > file
    printf "%10.0f (%.0f-%.0f)", m, v[1], v[NR] }'
}

printf '%-10s %32s %32s %10s\n' benchmark "$a_label events/s" "$b_label events/s" ratio
for name in window hop join pipeline; do
  : > "$work/on"
  : > "$work/off"
  for ((i = 0; i < RUNS; i++)); do
    if [ "$name" = pipeline ]; then
      pipeline_run "$EDDY" a >> "$work/on"
      pipeline_run "$b_bin" b "${b_flags[@]}" >> "$work/off"
      if ! diff -q <(sort "$work/a.out") <(sort "$work/b.out") > /dev/null; then
        echo "ERROR: the reference pipeline wrote different lines $a_label and $b_label"
        exit 1
      fi
    else
      bench_run "$EDDY" "$name" >> "$work/on"
      bench_run "$b_bin" "$name" "${b_flags[@]}" >> "$work/off"
    fi
  done
  on=$(summary "$work/on.median" < "$work/on")
  off=$(summary "$work/off.median" < "$work/off")
  ratio=$(awk -v a="$(cat "$work/on.median")" -v b="$(cat "$work/off.median")" 'BEGIN { printf "%.2fx", a / b }')
  printf '%-10s %32s %32s %10s\n' "$name" "$on" "$off" "$ratio"
done
echo "pipeline output: $(wc -l < "$work/a.out") tagged lines, the same $a_label and $b_label"

# Threads of a live reference pipeline: queries/ with its generators paced
# on the wall clock.
mkdir "$work/live"
for f in queries/*.sql; do
  sed "s/rate = '\${RATE:2}'/rate = '\${RATE:2}', realtime = 'true'/" "$f" > "$work/live/$(basename "$f")"
done
live_threads() {
  local bin=$1
  shift
  "$bin" run "$work/live" --quiet "$@" > /dev/null 2>&1 &
  local pid=$! most=0 n end
  end=$((SECONDS + LIVE_SECONDS))
  while [ $SECONDS -lt $end ]; do
    n=$(ls "/proc/$pid/task" 2>/dev/null | wc -l)
    [ "$n" -gt "$most" ] && most=$n
    sleep 0.2
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  echo "$most"
}
nodes=$("$EDDY" explain "$work/live" | sed -nE 's/^([0-9]+) node\(s\) run as ([0-9]+) task\(s\).*/\1 nodes, \2 tasks/p')
echo "live reference pipeline ($nodes at parallelism $EDDY_PARALLELISM): $(live_threads "$EDDY") threads $a_label, $(live_threads "$b_bin" "${b_flags[@]}") $b_label"
