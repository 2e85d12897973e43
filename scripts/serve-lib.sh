# Sourced by scripts that need a running `eddy serve`. Defines:
#   start_server EDDY DIR [ARGS...]   starts `EDDY serve` on a free loopback
#                                     port with its data root, output root and
#                                     state under DIR, waits until it listens,
#                                     and sets $base (its URL) and $server (its
#                                     pid). The caller stops it.
#   server_scratch                    makes $work, a temporary directory,
#                                     and on exit stops $server (if any)
#                                     and removes $work.
start_server() {
  local eddy=$1 dir=$2
  shift 2
  mkdir -p "$dir/data"
  "$eddy" serve --addr 127.0.0.1:0 --data-root "$dir/data" --output-root "$dir/out" --state-dir "$dir/state" \
    "$@" 2> "$dir/serve.log" &
  server=$!
  base=""
  for _ in $(seq 300); do
    base=$(sed -n 's/^eddy serving on \(http:[^ ]*\).*/\1/p' "$dir/serve.log")
    [ -n "$base" ] && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/serve.log" >&2
  echo "eddy serve did not start" >&2
  return 1
}

server_scratch() {
  work=$(mktemp -d)
  server=""
  trap 'server_scratch_end' EXIT
}

server_scratch_end() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
