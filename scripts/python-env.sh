# Sourced by the scripts that need Python tools. Defines:
#   python_env PACKAGE==VERSION...   the environment of the test command's
#       tools (the Kafka-protocol broker's package, schemathesis, DuckDB,
#       pyarrow), created once and installed all at once from
#       scripts/python-tools.txt, where every package and each one it
#       pulls in is pinned with its hashes (pip --require-hashes), again
#       whenever that file changes. Asking for a package the file does not
#       pin at that version is an error. Sets $VENV.
#   python_env_pinned DIR PACKAGE==VERSION...   a separate environment in
#       DIR for a tool the tests do not use (bench/flink.sh's PyFlink),
#       pinned by version from PyPI. Sets $VENV.
# The environments live outside the clone (EDDY_VENV, default
# ~/.cache/eddy-venv) so that repeated runs reuse them.
PYTHON_TOOLS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/python-tools.txt"

# Creates $VENV if needed, holding its lock (fd 9) for the caller.
_python_venv() {
  mkdir -p "$(dirname "$VENV")"
  # One installer at a time (tests may call this concurrently).
  exec 9>"$VENV.lock"
  flock 9
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
  fi
}

python_env() {
  VENV=${EDDY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-venv}
  for package in "$@"; do
    if ! grep -qi "^${package} " "$PYTHON_TOOLS"; then
      echo "python_env: $package is not pinned in $PYTHON_TOOLS (add it to python-tools.in and regenerate)" >&2
      return 1
    fi
  done
  _python_venv
  if ! cmp -s "$PYTHON_TOOLS" "$VENV/python-tools.txt"; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes -r "$PYTHON_TOOLS"
    cp "$PYTHON_TOOLS" "$VENV/python-tools.txt"
  fi
  flock -u 9
}

python_env_pinned() {
  VENV=$1
  shift
  _python_venv
  local missing=()
  for package in "$@"; do
    local name=${package%%==*} version=${package#*==}
    if [ "$("$VENV/bin/python" -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p')" != "$version" ]; then
      missing+=("$package")
    fi
  done
  if [ ${#missing[@]} -gt 0 ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
  fi
  flock -u 9
}
