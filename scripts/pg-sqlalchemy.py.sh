#!/usr/bin/env bash
# SQLAlchemy (the layer Superset and most Python BI tools connect
# through), with psycopg, against `eddy serve --pg-addr`: the checks of
# tests/pg_wire.rs's BI test.
#
#   scripts/pg-sqlalchemy.py.sh HOST PORT VIEW EXPECTED.json
#
# Connects (the dialect reads version(), standard_conforming_strings and
# looks types up with to_regtype inside a savepoint), checks the server
# version it read, that the inspector lists schema public (its query has
# LIKE ... ESCAPE '/') and VIEW among the views, that a
# query with a bound parameter inside a nested transaction (a savepoint)
# returns each row of EXPECTED (a JSON list of [key, ...], keyed by the
# view's first column), and that after a failed statement a rollback
# leaves the connection usable. Prints "sqlalchemy: ok".
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python-env.sh
python_env "sqlalchemy==2.1.9" "psycopg==3.3.9" >&2
exec "$VENV/bin/python" - "$@" <<'PY'
import json, sys
import sqlalchemy as sa

host, port, view, expected_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
expected = [tuple(row) for row in json.load(open(expected_path))]
engine = sa.create_engine(f"postgresql+psycopg://eddy@{host}:{port}/eddy")
with engine.connect() as conn:
    assert conn.dialect.server_version_info[:2] == (16, 6), conn.dialect.server_version_info
    inspector = sa.inspect(conn)
    schemas = inspector.get_schema_names()
    assert "public" in schemas and not any(s.startswith("pg_") for s in schemas), schemas
    views = inspector.get_view_names()
    assert view in views, views
    columns = [c[0] for c in conn.execute(sa.text(f"SELECT * FROM {view} LIMIT 0")).cursor.description]
    key = columns[0]
    query = sa.text(f"SELECT * FROM {view} WHERE {key} = :key")
    with conn.begin_nested():
        for row in expected:
            assert conn.execute(query, {"key": row[0]}).all() == [row], row[0]
    try:
        conn.execute(sa.text("SELECT no_such_column FROM " + view))
        raise AssertionError("a bad column answered")
    except sa.exc.ProgrammingError as e:
        assert "no_such_column" in str(e), e
        conn.rollback()
    assert conn.execute(query, {"key": expected[0][0]}).all() == [expected[0]]
    conn.rollback()
print(f"sqlalchemy: ok, {len(expected)} rows checked")
PY
