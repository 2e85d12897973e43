#!/usr/bin/env bash
# Debian's PostgreSQL, for the tests.
#
#   scripts/postgres.sh client
#     The client for the tests of `eddy serve --pg-addr` (tests/pg_wire.rs
#     drives psql, makes a TLS certificate with openssl and runs node-postgres
#     with Node.js, scripts/pg-client.node.sh): installs the
#     `postgresql-client`, `openssl`, `nodejs` and `npm` packages with apt
#     when one of their commands is missing.
#
#   scripts/postgres.sh server DIR PORT PASSWORD
#     A PostgreSQL server of its own for the `postgres-cdc` tests
#     (tests/postgres_cdc.rs): installs Debian's `postgresql` package when
#     missing, makes a cluster in DIR/data (superuser `postgres` with
#     PASSWORD, SCRAM on 127.0.0.1, replication connections allowed) and
#     starts it on 127.0.0.1:PORT with logical replication on
#     (wal_level = logical), its socket and log in DIR. Run as root, the
#     cluster belongs to the `postgres` user (PostgreSQL refuses root).
#
#   scripts/postgres.sh stop DIR
#     Stops that server at once.
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
  server)
    dir="${2:?usage: scripts/postgres.sh server DIR PORT PASSWORD}"
    port="${3:?usage: scripts/postgres.sh server DIR PORT PASSWORD}"
    password="${4:?usage: scripts/postgres.sh server DIR PORT PASSWORD}"
    bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
    if [ -z "$bin" ] || [ ! -x "$bin/postgres" ]; then
      echo "postgres.sh: installing Debian's postgresql" >&2
      sudo_if_needed apt-get update -qq
      sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
      bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    fi
    mkdir -p "$dir"
    as_owner=()
    if [ "$(id -u)" = 0 ]; then
      # The server runs as `postgres`: it must reach DIR through its parents.
      chown postgres "$dir"
      d="$dir"
      while [ "$d" != "/" ]; do chmod o+x "$d" 2>/dev/null || true; d="$(dirname "$d")"; done
      as_owner=(runuser -u postgres --)
    fi
    printf '%s\n' "$password" > "$dir/password"
    [ "$(id -u)" = 0 ] && chown postgres "$dir/password"
    "${as_owner[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=scram-sha-256 \
      --pwfile="$dir/password" --encoding=UTF8 --locale=C >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; exit 1; }
    rm -f "$dir/password"
    "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o \
      "-p $port -k $dir -c listen_addresses=127.0.0.1 -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    ;;
  stop)
    dir="${2:?usage: scripts/postgres.sh stop DIR}"
    bin="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    as_owner=()
    [ "$(id -u)" = 0 ] && as_owner=(runuser -u postgres --)
    "${as_owner[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    ;;
  *)
    echo "usage: scripts/postgres.sh client | server DIR PORT PASSWORD | stop DIR" >&2
    exit 2
    ;;
esac
