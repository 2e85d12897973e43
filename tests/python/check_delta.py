"""Checks Delta tables eddy wrote with readers that are not eddy: the
`deltalake` package (delta-rs) and polars.

Usage:
  check_delta.py dump TABLE [VERSION]
      prints the table's rows (at VERSION, default the newest), read by
      deltalake, as sorted JSON lines; TIMESTAMP values as ms since the epoch.
  check_delta.py verify TABLE NDJSON [--partition-by COL] [--streaming]
      the table's rows (deltalake, and polars) equal the NDJSON file's
      (another sink of the same query); each file lies in the directory its
      partition values name; with --streaming, every commit after the
      table's creation is one checkpoint's (a STREAMING UPDATE carrying the
      run's transaction, versions rising, no file added twice) and reading
      an earlier version (each of a short history, a dozen spread over a
      long one) gives exactly the rows the commits up to it added.
  check_delta.py history TABLE [--key COL,COL]
      prints one JSON line per commit: version, operation, the txn
      (appId, version) if any, files added and removed; with --key, also
      the rows of each version (a dozen spread over a long history) and
      how many of them repeat a key (a merged table never does), or
      "vacuumed" when a file of that version is gone.
  check_delta.py files TABLE
      prints {"live": files of the newest version, "on_disk": .parquet
      files under the table (not in _ or . directories), "ever_added":
      files any commit added}.
Exits non-zero naming the first difference; prints what it checked.
"""

import datetime
import glob
import json
import os
import sys
import urllib.parse

import polars as pl
from deltalake import DeltaTable


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def to_ms(value):
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return round(value.timestamp() * 1000)
    if isinstance(value, str):
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=datetime.timezone.utc)
        return round(parsed.timestamp() * 1000)
    return value


def timestamp_columns(table):
    schema = table.schema().to_arrow()
    return {f.name for f in schema if "timestamp" in str(f.type).lower()}


def canonical(row, timestamps):
    return json.dumps(
        {k: (to_ms(v) if k in timestamps else v) for k, v in row.items()},
        sort_keys=True,
        ensure_ascii=False,
    )


def rows_of(path, version=None, table=None):
    if table is None:
        table = DeltaTable(path, version=version)
    elif version is not None:
        table.load_as_version(version)
    timestamps = timestamp_columns(table)
    rows = table.to_pyarrow_table().to_pylist()
    return sorted(canonical(r, timestamps) for r in rows), timestamps


def commits(path):
    for name in sorted(glob.glob(os.path.join(path, "_delta_log", "*.json"))):
        version = int(os.path.basename(name).split(".")[0])
        with open(name, encoding="utf-8") as f:
            yield version, [json.loads(line) for line in f if line.strip()]


def dump(path, version):
    rows, _ = rows_of(path, version)
    for row in rows:
        print(row)


def verify(path, ndjson, partition_by, streaming):
    rows, timestamps = rows_of(path)
    columns = DeltaTable(path).schema().to_arrow().names
    with open(ndjson, encoding="utf-8") as f:
        # A sink with omit_nulls leaves NULL fields out of its lines.
        expected = sorted(
            canonical({c: json.loads(line).get(c) for c in columns}, timestamps)
            for line in f
            if line.strip()
        )
    if rows != expected:
        missing = sorted(set(expected) - set(rows))[:3]
        extra = sorted(set(rows) - set(expected))[:3]
        fail(f"{path}: {len(rows)} rows, the NDJSON sink wrote {len(expected)}; missing {missing}, extra {extra}")
    by_polars = pl.read_delta(path)
    if by_polars.height != len(expected):
        fail(f"{path}: polars reads {by_polars.height} rows, expected {len(expected)}")

    adds, txns, seen = [], {}, set()
    for version, actions in commits(path):
        kinds = [next(iter(a)) for a in actions]
        for action in actions:
            if "add" in action:
                add = action["add"]
                if add["path"] in seen:
                    fail(f"{path}: version {version} adds {add['path']} again")
                seen.add(add["path"])
                relative = urllib.parse.unquote(add["path"])
                if not os.path.exists(os.path.join(path, relative)):
                    fail(f"{path}: version {version} adds {relative}, which is not there")
                if partition_by:
                    value = add["partitionValues"][partition_by]
                    directory = relative.split("/")[0]
                    name, _, raw = directory.partition("=")
                    raw = urllib.parse.unquote(raw)
                    wanted = "__HIVE_DEFAULT_PARTITION__" if value is None else value
                    if name != partition_by or raw != wanted:
                        fail(f"{path}: {relative} holds partition value {value!r}")
                stats = json.loads(add["stats"])
                adds.append((version, stats["numRecords"]))
        if streaming and version > 0:
            info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
            if info["operation"] != "STREAMING UPDATE" or "txn" not in kinds:
                fail(f"{path}: version {version} is a {info['operation']} with actions {kinds}, not one checkpoint's commit")
            for action in actions:
                if "txn" in action:
                    txn = action["txn"]
                    previous = txns.get(txn["appId"], -1)
                    if txn["version"] <= previous:
                        fail(f"{path}: version {version} commits checkpoint {txn['version']} of {txn['appId']} after {previous}")
                    txns[txn["appId"]] = txn["version"]
    if streaming:
        newest = max(v for v, _ in commits(path))
        final = set(rows)
        table = DeltaTable(path, version=1)
        # Every version of a short history, a dozen spread over a long one.
        step = max(1, newest // 12)
        versions = sorted(set(range(1, newest + 1, step)) | {newest})
        for version in versions:
            at, _ = rows_of(path, version, table)
            added = sum(n for v, n in adds if v <= version)
            if len(at) != added or not set(at) <= final:
                fail(f"{path}: version {version} reads {len(at)} rows, its commits added {added}")
        print(f"{path}: {len(rows)} rows equal the NDJSON sink's (deltalake, polars); "
              f"{newest} checkpoint commits by {len(txns)} run(s), the rows of versions {versions[:3]}...{versions[-1]} exact")
    else:
        print(f"{path}: {len(rows)} rows equal the NDJSON sink's (deltalake, polars); {len(seen)} files")


def history(path, key):
    newest = max(v for v, _ in commits(path))
    step = max(1, newest // 12)
    sampled = set(range(0, newest + 1, step)) | {newest}
    table = DeltaTable(path, version=0)
    for version, actions in commits(path):
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        txn = next((a["txn"] for a in actions if "txn" in a), None)
        line = {
            "version": version,
            "operation": info.get("operation"),
            "txn": [txn["appId"], txn["version"]] if txn else None,
            "adds": sum(1 for a in actions if "add" in a),
            "removes": sum(1 for a in actions if "remove" in a),
            "files_skipped": int(info.get("operationParameters", {}).get("filesSkipped", 0)),
        }
        if key and (version in sampled or version > newest - 6):
            table.load_as_version(version)
            try:
                rows = table.to_pyarrow_table(columns=key).to_pylist()
            except FileNotFoundError:
                # A file of this version was vacuumed.
                line["vacuumed"] = True
                print(json.dumps(line))
                continue
            keys = [tuple(r[k] for k in key) for r in rows]
            line["rows"] = len(rows)
            line["repeated_keys"] = len(keys) - len(set(keys))
        print(json.dumps(line))


def files(path):
    live = len(DeltaTable(path).file_uris())
    on_disk = 0
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        on_disk += sum(1 for n in names if n.endswith(".parquet") and not n.startswith(("_", ".")))
    ever = len({a["add"]["path"] for _, actions in commits(path) for a in actions if "add" in a})
    print(json.dumps({"live": live, "on_disk": on_disk, "ever_added": ever}))


def main():
    args = sys.argv[1:]
    if args[0] == "dump":
        dump(args[1], int(args[2]) if len(args) > 2 else None)
    elif args[0] == "verify":
        partition_by = None
        if "--partition-by" in args:
            partition_by = args[args.index("--partition-by") + 1]
        verify(args[1], args[2], partition_by, "--streaming" in args)
    elif args[0] == "files":
        files(args[1])
    elif args[0] == "history":
        key = args[args.index("--key") + 1].split(",") if "--key" in args else None
        history(args[1], key)
    else:
        fail(__doc__)
    # Leave without the interpreter's teardown, in which the readers'
    # native thread pools have been seen to abort the process.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
