#!/usr/bin/env bash
# eddy against DataFusion batch on the window, hop, join and OVER queries, both
# doing the same work: the same result columns, computed from the same
# NDJSON files, and either written as one NDJSON file each by the
# engine's own JSON writer (eddy's file sink, DataFusion's `write_json`)
# or sent nowhere (eddy's blackhole sink, DataFusion's result stream
# drained). Nothing else is inside either timer: input rows are counted
# before DataFusion's starts.
#
# eddy runs at its default flags, as users run it (batch size, one
# instance per core; PARALLELISM sets instances). DataFusion runs at its
# own default batch size (8192) and at eddy's, and the hop also in its
# slice form (a count/sum per customer and second, added into windows);
# eddy is compared with the fastest of DataFusion's forms by median.
# Every engine and form runs in turn, RUNS times (default 5), each run a
# process of its own; the table shows medians with min-max. Written
# results are compared by value (`eddy bench compare`), and row counts
# always: a difference fails the script.
#
#   bench/datafusion.sh                        # 2,000,000 rows, dev profile
#   PROFILE=release CARGO_TARGET_DIR=~/.cache/eddy-release bench/datafusion.sh
#   ROWS=20000 RUNS=1 bench/datafusion.sh      # seconds (the test command)
#   QUERIES="hop" RESULTS=ndjson bench/datafusion.sh
#   README=1 ...                               # also write the table into bench/README.md
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-2000000}
RUNS=${RUNS:-5}
QUERIES=${QUERIES:-window hop join over}
RESULTS=${RESULTS:-nowhere ndjson}
. bench/lib.sh
# lib.sh pins one instance per keyed operator; here eddy runs as users run it.
[ -n "${PARALLELISM:-}" ] || unset EDDY_PARALLELISM
build_eddy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

eddy_batch=$("$EDDY" run --help | grep -A3 -- '--batch-size' | grep -o 'default: [0-9]*' | head -1 | cut -d' ' -f2)
"$EDDY" generate --stream orders --rate 1000 --count "$ROWS" > "$work/orders.ndjson"
"$EDDY" generate --stream payments --rate 1000 --count "$ROWS" > "$work/payments.ndjson"

command_line="$(for v in PROFILE ROWS RUNS QUERIES RESULTS PARALLELISM; do [ -z "${!v:-}" ] || printf '%s="%s" ' "$v" "${!v}"; done)bench/datafusion.sh"
{
  echo "\`$command_line\` on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d):"
  echo "$ROWS orders (and $ROWS payments for the join, whose events are both), profile $PROFILE, eddy at $eddy_batch-row batches (its default) and ${PARALLELISM:-one instance per core (its default)}${PARALLELISM:+ instance(s) per keyed operator}, median (min-max) of $RUNS alternating runs:"
} > "$work/heading"

# contestant -> `eddy bench` flags
declare -A flags=(
  [eddy]="--engine eddy"
  [datafusion]="--engine datafusion"
  [datafusion@$eddy_batch]="--engine datafusion --batch-size $eddy_batch"
  [datafusion-slices]="--engine datafusion-slices"
)

for query in $QUERIES; do
  case $query in
    join) input=(--orders "$work/orders.ndjson" --payments "$work/payments.ndjson") ;;
    *) input=(--input "$work/orders.ndjson") ;;
  esac
  contestants=(eddy datafusion "datafusion@$eddy_batch")
  [ "$query" != hop ] || contestants+=(datafusion-slices)
  for results in $RESULTS; do
    mkdir -p "$work/out"
    for ((run = 1; run <= RUNS; run++)); do
      for c in "${contestants[@]}"; do
        out=()
        if [ "$results" = ndjson ]; then
          out=(--output "$work/out/$query.$c.ndjson")
          rm -f "${out[1]}"
        fi
        # shellcheck disable=SC2086
        json=$("$EDDY" bench "$query" ${flags[$c]} "${input[@]}" "${out[@]}")
        printf '%s\t%s\t%s\t%s\n' "$query" "$results" "$c" "$json" >> "$work/runs.tsv"
        echo "$query $results $c run $run: $json" >&2
      done
    done
    if [ "$results" = ndjson ]; then
      for c in "${contestants[@]:1}"; do
        "$EDDY" bench compare --query "$query" --output "$work/out/$query.eddy.ndjson" \
          --against "$work/out/$query.$c.ndjson" >&2
      done
    fi
    rm -rf "$work/out"
  done
done

python3 bench/table.py "$work/heading" "$work/runs.tsv" > "$work/table.md"
cat "$work/table.md"
if [ -n "${README:-}" ]; then
  readme_section datafusion.sh "$work/table.md"
fi
