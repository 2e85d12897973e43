#!/usr/bin/env bash
# Debian's PostgreSQL client for the tests of `eddy serve --pg-addr`
# (tests/pg_wire.rs drives psql): installs the `postgresql-client` package
# with apt when `psql` is missing.
#
#   scripts/postgres.sh client
set -euo pipefail
sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

case "${1:-}" in
  client)
    if ! command -v psql >/dev/null 2>&1; then
      echo "postgres.sh: installing Debian's postgresql-client" >&2
      sudo_if_needed apt-get update -qq
      sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-client >/dev/null
    fi
    psql --version >&2
    ;;
  *)
    echo "usage: scripts/postgres.sh client" >&2
    exit 2
    ;;
esac
