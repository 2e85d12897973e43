#!/usr/bin/env python3
"""The table of bench/nexmark.sh, from its runs.

argv: HEADING RUNS EVENTS. HEADING is the text above the table; RUNS holds
one line per run: query, wall seconds, user and sys CPU seconds, peak
resident KiB. Prints markdown: per query, median (min-max) of wall time,
events/s, CPU seconds and events per CPU-second, the median peak, and the
Nexmark repository's published Flink figure per core (other hardware and
setup: shown, not divided by).
"""
import statistics
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from side_by_side_table import PUBLISHED  # noqa: E402


def spread(values, show):
    return f"{show(statistics.median(values))} ({show(min(values))}-{show(max(values))})"


def main():
    heading, runs_path, events = sys.argv[1], sys.argv[2], int(sys.argv[3])
    runs, order = {}, []
    for line in open(runs_path):
        q, wall, user, sys_, peak = line.split()
        if q not in runs:
            runs[q] = []
            order.append(q)
        runs[q].append((float(wall), float(user) + float(sys_), int(peak)))
    print(open(heading).read().rstrip("\n"))
    print()
    head = ["query", "wall s", "events/s", "CPU s", "events/CPU-s", "peak MiB",
            "Flink published per core"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    k = lambda v: f"{v / 1e3:,.0f}k"  # noqa: E731
    s = lambda v: f"{v:.2f}"  # noqa: E731
    for q in order:
        rs = runs[q]
        row = [q, spread([r[0] for r in rs], s), spread([events / r[0] for r in rs], k),
               spread([r[1] for r in rs], s), spread([events / r[1] for r in rs], k),
               f"{statistics.median(r[2] for r in rs) / 1024:.0f}",
               f"{PUBLISHED[q]:g}k" if q in PUBLISHED else "-"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
