"""Checks eddy's Python functions independently of eddy.

Usage: check_functions.py ROWS JOINED EVENTS

ROWS and JOINED are the outputs (NDJSON) of tests/python_functions.rs's
first and third queries; EVENTS is their input. The same functions the job
declares are applied here, by plain Python and by pyarrow, to the output's
input columns (which are first checked against the input), and must give
the values eddy wrote. Exits non-zero naming the first difference.
"""

import datetime
import json
import sys

import pyarrow as pa
import pyarrow.compute as pc


def label(name, qty, flag):
    return f"{name!r}/{qty}/{flag}"


def scaled(amount, qty):
    return pc.multiply(amount, pc.cast(qty, "double"))


def later(ts, qty):
    return ts + datetime.timedelta(milliseconds=qty)


def millis(text):
    value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return round(value.timestamp() * 1000)


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def main():
    rows_path, joined_path, events_path = sys.argv[1:4]
    events = {}
    with open(events_path) as f:
        for line in f:
            e = json.loads(line)
            events[e["id"]] = e
    with open(rows_path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if len(rows) != len(events):
        fail(f"{len(rows)} rows for {len(events)} events")

    for row in rows:
        e = events[row["id"]]
        for column in ("name", "qty", "flag", "amount"):
            if row[column] != e[column]:
                fail(f"row {row['id']}: {column} {row[column]!r}, the input has {e[column]!r}")
        if millis(row["event_time"]) != e["ts"]:
            fail(f"row {row['id']}: event_time {row['event_time']} is not {e['ts']} ms")
        expected = label(e["name"], e["qty"], e["flag"])
        if row["l"] != expected:
            fail(f"row {row['id']}: label {row['l']!r}, Python gives {expected!r}")
        ts = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=e["ts"])
        expected = later(ts, e["qty"])
        if millis(row["t"]) != round((expected - datetime.datetime(1970, 1, 1)).total_seconds() * 1000):
            fail(f"row {row['id']}: later {row['t']}, Python gives {expected}")

    # The vectorized function, applied by pyarrow to whole columns.
    amounts = pa.array([r["amount"] for r in rows], type=pa.float64())
    qtys = pa.array([r["qty"] for r in rows], type=pa.int32())
    expected = scaled(amounts, qtys).to_pylist()
    for row, want in zip(rows, expected):
        if row["s"] != want:
            fail(f"row {row['id']}: scaled {row['s']!r}, pyarrow gives {want!r}")

    with open(joined_path) as f:
        joined = [json.loads(line) for line in f if line.strip()]
    for row in joined:
        e = events[row["id"]]
        tier = f"tier-{e['uid'] % 3}"
        expected = label(tier, e["qty"], e["flag"])
        if row["l"] != expected:
            fail(f"joined row {row['id']}: label {row['l']!r}, Python gives {expected!r}")
    print(f"{len(rows)} rows and {len(joined)} joined rows as Python computes them")


main()
