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
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python-env.sh
python_env pyarrow==26.0.1 deltalake==1.6.6 >&2
if [ "${1:-}" = "--delta" ]; then
  exec "$VENV/bin/python" - "${2:?usage: bucket-read.py.sh --delta TABLE}" <<'PY'
import json, sys
from deltalake import DeltaTable

rows = DeltaTable(sys.argv[1]).to_pyarrow_table().to_pylist()
for line in sorted(json.dumps(r, sort_keys=True) for r in rows):
    print(line)
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
