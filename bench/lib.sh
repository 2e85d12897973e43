# Shared by the benchmark drivers in bench/. Source it; it defines:
#   build_eddy        builds eddy in $PROFILE (default dev) and sets EDDY
#                     (or takes EDDY_BIN, a binary built before, as it is)
#   enrichment_input DIR
#                     writes EVENTS generated events for the enrichment join
#                     as DIR/orders.ndjson and DIR/payments.ndjson (half each)
#   field JSON NAME   the number NAME holds in an `eddy bench` JSON line
#   flink_env         Apache Flink 1.20 as PyFlink (apache-flink==1.20.0 from
#                     PyPI, in a virtual environment of its own, EDDY_FLINK_VENV)
#                     on Java 17 (Debian's openjdk-17-jre-headless, installed
#                     if missing); sets FLINK_PYTHON and exports JAVA_HOME
#   readme_section N F  writes file F into bench/README.md between <!-- N --> and <!-- /N -->
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

flink_env() {
  local java17=/usr/lib/jvm/java-17-openjdk-amd64
  if [ ! -x "$java17/bin/java" ]; then
    if [ "$(id -u)" = 0 ]; then
      apt-get install -y -q openjdk-17-jre-headless >/dev/null
    else
      sudo apt-get install -y -q openjdk-17-jre-headless >/dev/null
    fi
  fi
  export JAVA_HOME=$java17
  . scripts/python-env.sh
  python_env_pinned "${EDDY_FLINK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-flink-venv}" apache-flink==1.20.0
  FLINK_PYTHON="$VENV/bin/python"
}
