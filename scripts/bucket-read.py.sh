#!/usr/bin/env bash
# Reads what eddy wrote to an S3-compatible bucket with readers that are
# not eddy (in eddy's Python environment). The endpoint and credentials
# come from the standard AWS environment variables (AWS_ENDPOINT_URL,
# AWS_ACCESS_KEY_ID, ...).
#
#   scripts/bucket-read.py.sh BUCKET/PREFIX
#       a prefix of Parquet files, by pyarrow's own S3 client: prints the
#       sum of its column `n`
#   scripts/bucket-read.py.sh --delta TABLE
#       a Delta table (s3://... or a local path), by the deltalake package:
#       prints its rows as sorted JSON lines
#   scripts/bucket-read.py.sh --duckdb BUCKET/PREFIX
#       the same prefix of Parquet files by DuckDB's httpfs extension:
#       prints the sum of its column `n`. DuckDB loads extensions built
#       for its own version, and PyPI has httpfs for 1.4.4 only (the
#       duckdb-ext-httpfs package), so this reader has an environment of
#       its own with DuckDB 1.4.4 (eddy's other tools use 2.0.0).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python-env.sh
if [ "${1:-}" = "--duckdb" ]; then
  python_env_pinned "${XDG_CACHE_HOME:-$HOME/.cache}/eddy-duckdb-httpfs" \
    duckdb==1.4.4 duckdb-ext-httpfs==1.4.4.20260205 >&2
  exec "$VENV/bin/python" - "${2:?usage: bucket-read.py.sh --duckdb BUCKET/PREFIX}" <<'PY'
import glob, os, sys, sysconfig
import duckdb

[ext] = glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "duckdb_ext/extensions/*/*/httpfs.duckdb_extension"))
endpoint = os.environ["AWS_ENDPOINT_URL"]
con = duckdb.connect()
con.execute(f"LOAD '{ext}'")
def quoted(text):
    return "'" + text.replace("'", "''") + "'"

con.execute(
    "CREATE SECRET (TYPE s3, URL_STYLE 'path', "
    f"KEY_ID {quoted(os.environ['AWS_ACCESS_KEY_ID'])}, "
    f"SECRET {quoted(os.environ['AWS_SECRET_ACCESS_KEY'])}, "
    f"ENDPOINT {quoted(endpoint.split('://', 1)[-1])}, "
    f"USE_SSL {'false' if endpoint.startswith('http://') else 'true'}, "
    f"REGION {quoted(os.environ.get('AWS_REGION', 'us-east-1'))})"
)
[(total,)] = con.execute(f"SELECT sum(n) FROM read_parquet('s3://{sys.argv[1]}/**/*.parquet')").fetchall()
print(total)
PY
fi
python_env pyarrow==26.0.1 deltalake==1.6.6 >&2
if [ "${1:-}" = "--delta" ]; then
  exec "$VENV/bin/python" - "${2:?usage: bucket-read.py.sh --delta TABLE}" <<'PY'
import json, os, sys
from deltalake import DeltaTable

rows = DeltaTable(sys.argv[1]).to_pyarrow_table().to_pylist()
for line in sorted(json.dumps(r, sort_keys=True) for r in rows):
    print(line)
# Everything is printed: leave without the interpreter's teardown, where
# deltalake's S3 threads now and then abort the process ("terminate called
# without an active exception") after the table was read whole.
sys.stdout.flush()
os._exit(0)
PY
fi
exec "$VENV/bin/python" - "${1:?usage: bucket-read.py.sh BUCKET/PREFIX}" <<'PY'
import os, sys
import pyarrow.dataset as ds
import pyarrow.fs as fs

s3 = fs.S3FileSystem(
    access_key=os.environ["AWS_ACCESS_KEY_ID"],
    secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
    endpoint_override=os.environ["AWS_ENDPOINT_URL"],
    region=os.environ.get("AWS_REGION", "us-east-1"),
)
prefix = sys.argv[1]
files = [
    info.path
    for info in s3.get_file_info(fs.FileSelector(prefix, recursive=True))
    if info.type == fs.FileType.File
]
hidden = [f for f in files if os.path.basename(f).startswith((".", "_"))]
if hidden:
    sys.exit(f"staged objects are visible: {hidden}")
table = ds.dataset(
    files,
    filesystem=s3,
    format="parquet",
    partitioning=ds.partitioning(flavor="hive"),
    partition_base_dir=prefix,
).to_table()
print(sum(table.column("n").to_pylist()))
PY
