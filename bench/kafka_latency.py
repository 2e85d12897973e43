"""Result lines of a live Kafka run (bench/kafka_flink.sh) stamped as they
arrive, and their latencies.

    python kafka_latency.py stamp OUT
        Copies stdin to OUT in chunks as they arrive, each chunk behind a
        header line `ARRIVAL_NS LENGTH` (the wall clock when it was read):
        cheap enough for hundreds of thousands of lines a second, and a
        line's arrival is its chunk's.
    python kafka_latency.py report QUERY STAMPED ROWS_OUT PACING [PACING]... [--warmup-ms N] [--delay-ms N]
            [--written ORDERS.ndjson PAYMENTS.ndjson]
        Reads the stamped lines of either engine (eddy's `TAG> {json}` or
        Flink's print sink `N> +I[a, b, c]`), writes them to ROWS_OUT as
        JSON rows (for bench/compare_outputs.py), and prints one JSON object:
        result rows, latency p50/p99/max in ms, and the latest result's
        event-time position. PACING files are `eddy generate --realtime`'s
        stderr (one per stream: orders, then payments), which tell at what
        wall-clock instant an event time was due.
        - window (country, window_end, orders): a window's result can come
          once the watermark passes its end: when the first event at or
          after window_end + delay is due. Latency = arrival - that.
        - join (payment_id, order_id, order_ts, payment_ts): a pair can
          come once both rows are in: latency = arrival - the later of the
          instants its order and its payment were written. The generator
          writes a row once the latest event time before it in its stream
          is due (its rows are out of order): --written gives the same
          generator's rows (not paced), from which that is found.
        Results due in the first --warmup-ms after the feed started are
        left out (the job's readers start while the feed runs).
"""

import datetime
import json
import os
import re
import sys
import time

COLUMNS = {
    "window": ["country", "window_end", "orders"],
    "join": ["payment_id", "order_id", "order_ts", "payment_ts"],
}
PACING = re.compile(r"event time (\d+) ms is due at wall clock (\d+) ms")


def stamp(out_path):
    with open(out_path, "wb") as out:
        while True:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                return
            out.write(b"%d %d\n" % (time.time_ns(), len(chunk)))
            out.write(chunk)
            out.flush()


def stamped_lines(path):
    """(arrival ms, line) for each whole line, in order."""
    with open(path, "rb") as f:
        data = f.read()
    pending, at = b"", 0
    while at < len(data):
        newline = data.index(b"\n", at)
        arrival_ns, length = (int(x) for x in data[at:newline].split())
        chunk = data[newline + 1 : newline + 1 + length]
        at = newline + 1 + length
        pieces = (pending + chunk).split(b"\n")
        pending = pieces.pop()
        for piece in pieces:
            yield arrival_ns // 1_000_000, piece.decode()


def written_times(path, id_column, time_column):
    """Each row's id -> the latest event time up to and including it in
    the file: the event time at which a paced generator writes it."""
    pattern = re.compile(rb'"%s":"([^"]*)".*"%s":(\d+)' % (id_column.encode(), time_column.encode()))
    out, latest = {}, 0
    with open(path, "rb") as f:
        for line in f:
            m = pattern.search(line)
            latest = max(latest, int(m.group(2)))
            out[m.group(1).decode()] = latest
    return out


def epoch_ms(value):
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip().replace(" ", "T")
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    instant = datetime.datetime.fromisoformat(text)
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=datetime.timezone.utc)
    return int(instant.timestamp() * 1000)


def parse(line, columns):
    """A result row from eddy's or Flink's line; None for other output."""
    eddy = re.match(r"^[A-Z_]+> (?:[+-][IUD] )?(\{.*\})$", line)
    if eddy:
        return json.loads(eddy.group(1))
    flink = re.match(r"^(?:\d+> )?\+I\[(.*)\]$", line)
    if flink:
        values = flink.group(1).split(", ")
        if len(values) != len(columns):
            raise SystemExit(f"kafka_latency.py: {len(values)} values, not {len(columns)}: {line!r}")
        row = {}
        for name, value in zip(columns, values):
            row[name] = None if value == "<NULL>" else value
        return row
    return None


def report(args):
    warmup_ms, delay_ms, written = 2000, 2000, None
    positional = []
    i = 0
    while i < len(args):
        if args[i] == "--warmup-ms":
            warmup_ms, i = int(args[i + 1]), i + 2
        elif args[i] == "--delay-ms":
            delay_ms, i = int(args[i + 1]), i + 2
        elif args[i] == "--written":
            written, i = (args[i + 1], args[i + 2]), i + 3
        else:
            positional.append(args[i])
            i += 1
    query, stamped, rows_out, *pacing_files = positional
    columns = COLUMNS[query]
    pacings = []
    for path in pacing_files:
        m = PACING.search(open(path).read())
        if not m:
            raise SystemExit(f"kafka_latency.py: no pacing line in {path}")
        pacings.append((int(m.group(1)), int(m.group(2))))

    def due(event_ms, stream=0):
        origin, wall = pacings[stream]
        return wall + event_ms - origin

    if query == "join":
        if written is None or len(pacings) != 2:
            raise SystemExit("kafka_latency.py: join needs two pacing files and --written")
        written_at = [written_times(written[0], "order_id", "order_ts"),
                      written_times(written[1], "payment_id", "payment_ts")]
    feed_start = min(wall for _, wall in pacings)
    latencies, rows, latest = [], [], None
    for arrival, line in stamped_lines(stamped):
        row = parse(line, columns)
        if row is None:
            continue
        if query == "window":
            end = epoch_ms(row["window_end"])
            row = {"country": row["country"], "window_end": end, "orders": int(row["orders"])}
            due_at, position = due(end + delay_ms), end
        else:
            row = {k: (row[k] if k in ("payment_id", "order_id") else int(row[k])) for k in columns}
            due_at = max(due(written_at[0][row["order_id"]], 0), due(written_at[1][row["payment_id"]], 1))
            position = max(row["order_ts"], row["payment_ts"])
        rows.append(row)
        latest = position if latest is None else max(latest, position)
        if due_at - feed_start >= warmup_ms:
            latencies.append(arrival - due_at)
    with open(rows_out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else None
    print(json.dumps({
        "rows": len(rows),
        "measured": len(latencies),
        "p50_ms": pick(0.50),
        "p99_ms": pick(0.99),
        "max_ms": latencies[-1] if latencies else None,
        "latest_event_ms": latest,
    }))


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "stamp":
        stamp(sys.argv[2])
    elif len(sys.argv) >= 6 and sys.argv[1] == "report":
        report(sys.argv[2:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
