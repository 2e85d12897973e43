#!/usr/bin/env bash
# Debian's PostgreSQL client for the tests of `eddy serve --pg-addr`
# (tests/pg_wire.rs drives psql, makes a TLS certificate with openssl and
# runs node-postgres with Node.js, scripts/pg-client.node.sh): installs the
# `postgresql-client`, `openssl`, `nodejs` and `npm` packages with apt when
# one of their commands is missing.
#
#   scripts/postgres.sh client
set -euo pipefail
sudo_if_needed() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

case "${1:-}" in
  client)
    missing=""
    command -v psql >/dev/null 2>&1 || missing="$missing postgresql-client"
    command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
    command -v node >/dev/null 2>&1 || missing="$missing nodejs"
    command -v npm >/dev/null 2>&1 || missing="$missing npm"
    if [ -n "$missing" ]; then
      echo "postgres.sh: installing Debian's$missing" >&2
      sudo_if_needed apt-get update -qq
      # shellcheck disable=SC2086
      sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
    fi
    psql --version >&2
    ;;
  *)
    echo "usage: scripts/postgres.sh client" >&2
    exit 2
    ;;
esac
