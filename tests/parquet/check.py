"""Reads eddy's Parquet output with two independent readers, DuckDB and
pyarrow, and compares it with eddy's NDJSON output of the same run.

usage: check.py PARQUET_DIR NDJSON_DIR [PARTITIONED_DIR]

For every sink directory under PARQUET_DIR: both readers read it as it is;
every timestamp column is UTC-adjusted (pyarrow: tz UTC; DuckDB: TIMESTAMP
WITH TIME ZONE); row counts and the sums of numeric columns equal those of
NDJSON_DIR/<sink>.ndjson. PARTITIONED_DIR, if given, holds a Hive-partitioned
sink that DuckDB must read with hive_partitioning, seeing the partition
column. Exits 1 on the first difference.
"""
import json
import math
import os
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq


def fail(message):
    print(f"parquet-check: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def ndjson_rows(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def one(query):
    """The single value a query returns."""
    return duckdb.sql(query).fetchall()[0][0]


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


def check_sink(sink_dir, ndjson_path):
    name = os.path.basename(sink_dir)
    table = pq.read_table(sink_dir)
    for field in table.schema:
        if pa.types.is_timestamp(field.type) and field.type.tz != "UTC":
            fail(f"{name}.{field.name}: {field.type} is not UTC-adjusted")
        if pa.types.is_string_view(field.type):
            fail(f"{name}.{field.name}: written as a string view")
    glob = os.path.join(sink_dir, "**", "*.parquet")
    described = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{glob}')").fetchall()
    for column, kind, *_ in described:
        if kind.startswith("TIMESTAMP") and kind != "TIMESTAMP WITH TIME ZONE":
            fail(f"{name}.{column}: DuckDB reads {kind}")
    expected = ndjson_rows(ndjson_path)
    count = one(f"SELECT count(*) FROM read_parquet('{glob}')")
    if count != len(expected) or table.num_rows != len(expected):
        fail(f"{name}: DuckDB {count} rows, pyarrow {table.num_rows}, NDJSON {len(expected)}")
    numeric = [
        f.name
        for f in table.schema
        if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
    ]
    for column in numeric:
        want = sum(r.get(column) or 0 for r in expected)
        got_duck = one(f'SELECT coalesce(sum("{column}"), 0) FROM read_parquet(\'{glob}\')')
        got_arrow = sum(v or 0 for v in table.column(column).to_pylist())
        if not (close(float(got_duck), float(want)) and close(float(got_arrow), float(want))):
            fail(f"{name}.{column}: sum DuckDB {got_duck}, pyarrow {got_arrow}, NDJSON {want}")
    print(f"parquet-check: {name}: {count} rows, {len(numeric)} numeric columns' sums and "
          f"{sum(1 for f in table.schema if pa.types.is_timestamp(f.type))} UTC timestamp columns agree")


def main():
    parquet_dir, ndjson_dir = sys.argv[1], sys.argv[2]
    sinks = sorted(d for d in os.listdir(parquet_dir) if os.path.isdir(os.path.join(parquet_dir, d)))
    if not sinks:
        fail(f"no sinks under {parquet_dir}")
    for sink in sinks:
        check_sink(os.path.join(parquet_dir, sink), os.path.join(ndjson_dir, f"{sink}.ndjson"))
    if len(sys.argv) > 3:
        partitioned = sys.argv[3]
        glob = os.path.join(partitioned, "**", "*.parquet")
        rows = duckdb.sql(
            f"SELECT site_id, count(*) FROM read_parquet('{glob}', hive_partitioning = true) "
            "GROUP BY site_id ORDER BY site_id"
        ).fetchall()
        files = [f for _, _, fs in os.walk(partitioned) for f in fs]
        if len(rows) < 2 or len(files) <= len(rows):
            fail(f"partitioned: {rows} from {len(files)} files")
        print(f"parquet-check: partitioned: DuckDB sees partitions {[r[0] for r in rows]} in {len(files)} files")


main()
