# Shared by the benchmark drivers in bench/. Source it; it defines:
#   build_eddy        builds eddy in $PROFILE (default dev) and sets EDDY
#                     (or takes EDDY_BIN, a binary built before, as it is)
#   enrichment_input DIR
#                     writes EVENTS generated events for the enrichment join
#                     as DIR/orders.ndjson and DIR/payments.ndjson (half each)
#   compare A B       prints events/s, peak memory and eddy/datafusion ratios
#                     of two `eddy bench` JSON lines; fails if their outputs differ
#   readme_section N F  writes file F into bench/README.md between <!-- N --> and <!-- /N -->
#   alternate F G     runs the functions F and G (each prints one `eddy bench`
#                     JSON line) in turn RUNS times (default 5), prints each
#                     one's events/s per run on stderr and its median run
#                     (by events/s) on stdout, F's line first: one run of
#                     either engine varies by 10-15% on a busy 2-core machine
#
# Every eddy the benchmarks start runs PARALLELISM instances of each keyed
# operator (EDDY_PARALLELISM; default 1 here, where eddy's own default is one
# per core: on 2 cores one instance is the faster, see bench/README).

export EDDY_PARALLELISM=${PARALLELISM:-1}

build_eddy() {
  PROFILE=${PROFILE:-dev}
  # EDDY_BIN: benchmark that binary as it is (built earlier), no build.
  if [ -n "${EDDY_BIN:-}" ]; then
    EDDY=$EDDY_BIN
    return
  fi
  if [ "$PROFILE" = dev ]; then
    cargo build -q -p eddy-cli
    EDDY=${CARGO_TARGET_DIR:-target}/debug/eddy
  else
    cargo build -q -p eddy-cli --profile "$PROFILE"
    EDDY=${CARGO_TARGET_DIR:-target}/$PROFILE/eddy
  fi
}

enrichment_input() {
  local half=$((EVENTS / 2))
  "$EDDY" generate --stream orders --rate 1000 --count "$half" > "$1/orders.ndjson"
  "$EDDY" generate --stream payments --rate 1000 --count "$half" > "$1/payments.ndjson"
  echo "input: $half orders + $half payments; profile $PROFILE"
}

field() { sed -E "s/.*\"$2\":([0-9.]+).*/\1/" <<<"$1"; }

compare() {
  local eddy_json=$1 df_json=$2
  echo "eddy:       $eddy_json"
  echo "datafusion: $df_json"
  awk -v er="$(field "$eddy_json" rows_per_second)" -v dr="$(field "$df_json" rows_per_second)" \
      -v em="$(field "$eddy_json" peak_rss_bytes)" -v dm="$(field "$df_json" peak_rss_bytes)" \
      -v eo="$(field "$eddy_json" output_rows)" -v do_="$(field "$df_json" output_rows)" 'BEGIN {
    printf "eddy       %12.0f events/s  peak %7.1f MiB\n", er, em / 1048576
    printf "datafusion %12.0f events/s  peak %7.1f MiB\n", dr, dm / 1048576
    printf "ratio eddy/datafusion: throughput %.2fx, peak memory %.2fx\n", er / dr, em / dm
    if (eo != do_) { printf "ERROR: output rows differ (eddy %d, datafusion %d)\n", eo, do_; exit 1 }
  }'
}

# The JSON line with the median rows_per_second of the lines on stdin.
median_run() {
  awk -F'"rows_per_second":' '{ split($2, v, /[,}]/); print v[1] "\t" $0 }' | sort -g |
    awk -F'\t' '{ line[NR] = $2 } END { print line[int((NR + 1) / 2)] }'
}

alternate() {
  local runs=${RUNS:-5} i first=() second=()
  for ((i = 0; i < runs; i++)); do
    first+=("$("$1")")
    second+=("$("$2")")
  done
  local f g
  for f in first second; do
    local -n lines=$f
    g=$(printf '%s\n' "${lines[@]}" | sed -E 's/.*"rows_per_second":([0-9.]+).*/\1/' | tr '\n' ' ')
    echo "$([ $f = first ] && echo "$1" || echo "$2") events/s over $runs runs: $g" >&2
  done
  printf '%s\n' "${first[@]}" | median_run
  printf '%s\n' "${second[@]}" | median_run
}

# readme_section NAME FILE: replaces what bench/README.md holds between the
# lines `<!-- NAME -->` and `<!-- /NAME -->` with FILE, so the figures
# there are the ones the script printed.
readme_section() {
  local name=$1 file=$2 readme=bench/README.md
  grep -qx "<!-- $name -->" "$readme" || { echo "bench/README.md has no <!-- $name --> section" >&2; return 1; }
  awk -v start="<!-- $name -->" -v end="<!-- /$name -->" -v file="$file" '
    $0 == start { print; while ((getline line < file) > 0) print line; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }' "$readme" > "$readme.new"
  mv "$readme.new" "$readme"
  echo "bench/README.md: section $name rewritten" >&2
}
