#!/usr/bin/env python3
"""Result latency of live server jobs, read from their sinks' tails.

Usage: tail_latency.py BASE SECONDS < jobs

Each line of stdin names one job: `ID SINK ORIGIN_MS STARTED_MS DELAY_MS`.
The job's generator is paced on the wall clock (`realtime = 'true'`): its
event of time t is due at wall clock STARTED_MS + (t - ORIGIN_MS), where
ORIGIN_MS is the first event's time and STARTED_MS the job's start as the
server recorded it (the pacer starts a few milliseconds later, so the
figures are upper bounds by that much). A 1 s window ending at E closes
when an event of time E + DELAY_MS (the watermark delay) arrives, so its
result's latency is when its row came over the tail
(GET /api/v1/jobs/ID/sinks/SINK/tail, Server-Sent Events) minus when that
event was due. Rows carry the window's end as `window_end_ms`.

Reads every job's tail for SECONDS seconds on a thread each, then prints
`rows p50 p99 max` in milliseconds over all jobs' rows (stdlib only).
"""

import http.client
import json
import sys
import threading
import time
import urllib.parse


def tail(base, job, sink, deadline, out):
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
            out.append((now_ms, row["window_end_ms"]))
    conn.close()


def main():
    base, seconds = sys.argv[1], float(sys.argv[2])
    deadline = time.time() + seconds
    jobs, threads = [], []
    for line in sys.stdin:
        if not line.strip():
            continue
        job, sink, origin, started, delay = line.split()
        rows = []
        jobs.append((int(origin), int(started), int(delay), rows))
        t = threading.Thread(target=tail, args=(base, job, sink, deadline, rows), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join(seconds + 10)
    latencies = []
    for origin, started, delay, rows in jobs:
        for arrived, window_end in rows:
            due = started + (window_end + delay - origin)
            latencies.append(arrived - due)
    latencies.sort()
    if not latencies:
        sys.exit("no result rows came over the tails")
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]
    print(f"{len(latencies)} {pick(0.5):.0f} {pick(0.99):.0f} {latencies[-1]:.0f}")


if __name__ == "__main__":
    main()
