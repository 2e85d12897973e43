# Sourced by the scripts that need Python tools. Defines:
#   python_env PACKAGE==VERSION...   creates (once) a virtual environment
#                                    for eddy's tools and installs the pinned
#                                    packages from PyPI; sets $VENV.
# The environment lives outside the clone (EDDY_VENV, default
# ~/.cache/eddy-venv) so that repeated runs reuse it.
python_env() {
  VENV=${EDDY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/eddy-venv}
  mkdir -p "$(dirname "$VENV")"
  # One installer at a time (tests may call this concurrently).
  exec 9>"$VENV.lock"
  flock 9
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
  fi
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
