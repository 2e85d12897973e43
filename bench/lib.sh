# Shared by the benchmark drivers in bench/. Source it; it defines:
#   build_eddy        builds eddy in $PROFILE (default dev) and sets EDDY
#   compare A B       prints events/s, peak memory and eddy/datafusion ratios
#                     of two `eddy bench` JSON lines; fails if their outputs differ

build_eddy() {
  PROFILE=${PROFILE:-dev}
  if [ "$PROFILE" = dev ]; then
    cargo build -q -p eddy-cli
    EDDY=${CARGO_TARGET_DIR:-target}/debug/eddy
  else
    cargo build -q -p eddy-cli --profile "$PROFILE"
    EDDY=${CARGO_TARGET_DIR:-target}/$PROFILE/eddy
  fi
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
