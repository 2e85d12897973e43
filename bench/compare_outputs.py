"""Compares what two engines wrote for the same query, by value: the rows
each output leaves, sorted, must be equal (floats within a relative and
absolute 1e-9), or it exits 1 naming the rows that differ.

    python3 compare_outputs.py [--tag NAME] [--columns A,B] LEFT_NAME LEFT_PATH RIGHT_NAME RIGHT_PATH
    python3 compare_outputs.py [--tag NAME] NAME PATH     # its rows counted only

`--columns A,B`: only these columns of each row are compared, for a query
whose other columns SQL leaves open (a Top-1 among rows tied on its ORDER
BY: which tied row is kept differs between engines by design).

Out: one JSON line on stdout, {"LEFT_NAME_rows": N, "RIGHT_NAME_rows": M,
"equal": true|false}, and on a difference up to five rows of each side's
surplus on stderr.

A path is a file or a directory (none there: no rows), every file under it read (names starting
with `.` or `_` left out: in-progress files, `_SUCCESS`). Each line is one
of:
- a Debezium change event ({"before", "after", "op"}): `c`, `r` add the
  after image, `d` takes the before image away, `u` both;
- a JSON object: a row added;
- `NAME> ` and a JSON object, optionally after a change kind (`+I`, `+U`
  add, `-U`, `-D` take away): eddy's tagged stdout lines; with `--tag NAME`
  only that table's tagged lines are read, other tables' skipped;
- anything else: a CSV line (Flink's `csv` format), its fields a row.
A file under `k=v` directories (a partitioned sink) has those pairs added
to each of its rows, so the partitioning is compared too. The rows left
after replaying every change are compared: intermediate changes (how
updates were batched) may differ between engines; the final table may not.

Values are compared as what they mean: numbers as numbers (an integral
double equals the integer), timestamps as instants written any of the
common ways (`2024-01-01 00:00:10`, `2024-01-01T00:00:10.000Z`), a JSON
field that is null the same as one left out, strings
that read as either compared as such on both sides alike.
"""

import collections
import csv
import json
import math
import os
import re
import sys

TOLERANCE = 1e-9
TIMESTAMP = re.compile(
    r"(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]00:?00)?"
)
TAGGED = re.compile(r"([A-Za-z0-9_]+)> (?:([+-][IUD]) )?(\{.*)")


def value(v):
    """A value in a form both engines' spellings of it share."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return float(v) if abs(v) < 2**53 else v
    if isinstance(v, dict):
        return row(v)
    if isinstance(v, list):
        return tuple(value(x) for x in v)
    try:
        return value(int(v))
    except ValueError:
        pass
    try:
        number = float(v)
        if math.isfinite(number):
            return number
    except ValueError:
        pass
    m = TIMESTAMP.fullmatch(v)
    if m:
        date, hour, minute, second, fraction, _ = m.groups()
        return f"{date} {hour}:{minute}:{second or '00'}.{(fraction or '').ljust(9, '0')}"
    return v


def row(fields):
    if isinstance(fields, dict):
        # A null and a missing field are one (writers that omit nulls).
        return tuple(sorted((k, value(v)) for k, v in fields.items() if v is not None))
    return tuple(value(v) for v in fields)


def files_under(path):
    if os.path.isfile(path):
        return [(path, [])]
    found = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        partition = [
            part.split("=", 1)
            for part in os.path.relpath(root, path).split(os.sep)
            if "=" in part
        ]
        found += [
            (os.path.join(root, n), partition)
            for n in sorted(names)
            if not n.startswith((".", "_"))
        ]
    return found


def table(name, path, tag, columns=None):
    """The rows NAME's output at PATH leaves, as a Counter of rows."""
    rows = collections.Counter()
    if not os.path.exists(path):
        # Flink's file sink makes its directory with its first row.
        print(f"compare_outputs.py: {name} wrote no file at {path}: no rows", file=sys.stderr)
        return rows
    for file, partition in files_under(path):
        with open(file, newline="") as f:
            for number, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if not line:
                    continue
                where = f"{file}:{number}"
                for sign, fields in changes(line, tag, where):
                    if isinstance(fields, dict):
                        fields = dict(fields, **dict(partition))
                        if columns is not None:
                            fields = {c: fields.get(c) for c in columns}
                    else:
                        fields = [v for _, v in partition] + fields
                    key = row(fields)
                    rows[key] += sign
                    if rows[key] < 0:
                        raise SystemExit(f"compare_outputs.py: {where}: {name} takes away a row it never added: {line[:200]}")
    return +rows


def changes(line, tag, where):
    """The (sign, fields) changes one line makes."""
    tagged = TAGGED.fullmatch(line)
    if tagged:
        table_name, kind, text = tagged.groups()
        if tag is not None and table_name != tag:
            return []
        return [(-1 if kind in ("-U", "-D") else 1, parse_json(text, where))]
    if line.startswith("{"):
        event = parse_json(line, where)
        if set(event) >= {"op", "after"} and set(event) <= {"before", "after", "op", "source", "ts_ms"}:
            op = event["op"]
            out = []
            if op in ("u", "d"):
                out.append((-1, event["before"]))
            if op in ("c", "r", "u"):
                out.append((1, event["after"]))
            if not out:
                raise SystemExit(f"compare_outputs.py: {where}: unknown Debezium op {op!r}")
            return out
        return [(1, event)]
    return [(1, next(csv.reader([line])))]


def parse_json(text, where):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SystemExit(f"compare_outputs.py: {where}: not JSON ({e}): {text[:200]}")


def close(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b


def shape(r):
    """The row with its floats blanked: rows that may pair within tolerance share it."""
    if isinstance(r, float):
        return float
    if isinstance(r, tuple):
        return tuple(shape(x) for x in r)
    return r


def unmatched(left, right):
    """The rows of each side the other lacks, floats paired within tolerance."""
    only_left, only_right = left - right, right - left
    groups = collections.defaultdict(lambda: ([], []))
    for rows, side in ((only_left, 0), (only_right, 1)):
        for r, n in rows.items():
            groups[shape(r)][side].extend([r] * n)
    rest_left, rest_right = [], []
    for a, b in groups.values():
        # Rows of one shape differ in their floats only: sorted, a row's
        # partner within tolerance is its neighbour on the other side.
        a.sort()
        b.sort()
        i = j = 0
        while i < len(a) and j < len(b):
            if close(a[i], b[j]):
                i += 1
                j += 1
            elif a[i] < b[j]:
                rest_left.append(a[i])
                i += 1
            else:
                rest_right.append(b[j])
                j += 1
        rest_left += a[i:]
        rest_right += b[j:]
    return rest_left, rest_right


def main():
    args = sys.argv[1:]
    tag = columns = None
    while args[:1] in (["--tag"], ["--columns"]):
        if args[0] == "--tag":
            tag = args[1]
        else:
            columns = args[1].split(",")
        args = args[2:]
    if len(args) == 2:
        print(json.dumps({f"{args[0]}_rows": sum(table(*args, tag).values())}, separators=(",", ":")))
        return
    if len(args) != 4:
        raise SystemExit(__doc__)
    left_name, left_path, right_name, right_path = args
    left = table(left_name, left_path, tag, columns)
    right = table(right_name, right_path, tag, columns)
    rest_left, rest_right = unmatched(left, right)
    equal = not rest_left and not rest_right
    for name, rest in ((left_name, rest_left), (right_name, rest_right)):
        if rest:
            print(f"{len(rest)} row(s) only {name} has, e.g.:", file=sys.stderr)
            for r in sorted(rest, key=repr)[:5]:
                print(f"  {r}", file=sys.stderr)
    print(json.dumps({
        f"{left_name}_rows": sum(left.values()),
        f"{right_name}_rows": sum(right.values()),
        "equal": equal,
    }, separators=(",", ":")))
    sys.exit(0 if equal else 1)


if __name__ == "__main__":
    main()
