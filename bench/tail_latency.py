#!/usr/bin/env python3
"""Result latency of live server jobs, read from their sinks' tails.

Usage: tail_latency.py BASE SECONDS EDDY < jobs

Each line of stdin names one job's sink: `ID SINK FIELD ORIGIN_MS WALL_MS
DELAY_MS STREAM SEED RATE`. The sink's rows are windows over a generated
STREAM (SEED, RATE) paced on the wall clock (`realtime = 'true'`): the
pacer hands a row on once the wall clock since its start (WALL_MS, epoch)
has caught up with the row's event time since ORIGIN_MS (both as the job's
connectors report them: `generator T: paced from event time ORIGIN_MS at
wall clock WALL_MS`). A window ending at E fires once the watermark passes
E by DELAY_MS (the watermark's delay plus any allowed lateness): when the
first row of event time E + DELAY_MS or later comes. Which row that is
comes from the stream itself (EDDY generate, the same rows in the same
order), so a window that waits out a gap in the stream (the reference
scenario has a 12.6 s one) is due when the gap ends, not before: what is
measured is the engine's delay, not the data's. A row's latency is when it
came over the tail (GET /api/v1/jobs/ID/sinks/SINK/tail, Server-Sent
Events) minus when its window was due. Rows carry the window's end in
FIELD: epoch milliseconds, or an RFC 3339 time.

Reads every job's tail for SECONDS seconds on a thread each, then prints
`rows p50 p99 max` in milliseconds over all jobs' rows (stdlib only).
TAIL_ROWS=PATH also writes each row: `job arrived window_end latency`.
"""

import bisect
import datetime
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse


def epoch_ms(value):
    if isinstance(value, (int, float)):
        return value
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000


def tail(base, job, sink, field, deadline, out):
    url = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=5)
    conn.request("GET", f"/api/v1/jobs/{job}/sinks/{sink}/tail")
    resp = conn.getresponse()
    event = None
    while time.time() < deadline:
        try:
            line = resp.readline()
        except (TimeoutError, OSError):
            continue
        if not line:
            break
        now_ms = time.time() * 1000
        line = line.decode().rstrip("\n")
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:") and event == "row":
            row = json.loads(line[5:])
            out.append((now_ms, epoch_ms(row[field])))
    conn.close()


def paced_times(eddy, stream, seed, rate, span_ms):
    """The running maximum of the stream's event times, row by row in the
    order the pacer hands rows on, over the first span_ms of event time."""
    count = max(100, int(int(rate) * 1.2 * span_ms / 1000) + 100)
    out = subprocess.run(
        [eddy, "generate", "--stream", stream, "--seed", seed, "--rate", rate, "--count", str(count)],
        check=True, capture_output=True, text=True,
    ).stdout
    column = {"orders": "order_ts", "payments": "payment_ts", "devices": "event_ts"}[stream]
    most, times = None, []
    for line in out.splitlines():
        t = json.loads(line)[column]
        most = t if most is None else max(most, t)
        times.append(most)
    return times


def main():
    base, seconds, eddy = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    deadline = time.time() + seconds
    jobs, threads = [], []
    for line in sys.stdin:
        if not line.strip():
            continue
        job, sink, field, origin, wall, delay, stream, seed, rate = line.split()
        rows = []
        jobs.append((int(origin), int(wall), int(delay), (stream, seed, rate), rows))
        t = threading.Thread(target=tail, args=(base, job, sink, field, deadline, rows), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join(seconds + 10)
    latencies, unknown = [], 0
    written = open(os.environ["TAIL_ROWS"], "w") if os.environ.get("TAIL_ROWS") else None
    for n, (origin, wall, delay, (stream, seed, rate), rows) in enumerate(jobs):
        if not rows:
            continue
        span = time.time() * 1000 - wall + 60_000
        times = paced_times(eddy, stream, seed, rate, span)
        for arrived, window_end in rows:
            i = bisect.bisect_left(times, window_end + delay)
            if i == len(times):
                unknown += 1
                continue
            latency = arrived - (wall + times[i] - origin)
            latencies.append(latency)
            if written:
                written.write(f"{n} {arrived:.0f} {window_end:.0f} {latency:.0f}\n")
    if written:
        written.close()
    if unknown:
        print(f"{unknown} row(s) past the generated span left out", file=sys.stderr)
    latencies.sort()
    if not latencies:
        sys.exit("no result rows came over the tails")
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
    print(f"{len(latencies)} {pick(0.5):.0f} {pick(0.99):.0f} {latencies[-1]:.0f}")


if __name__ == "__main__":
    main()
