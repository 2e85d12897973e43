#!/usr/bin/env python3
"""The table of bench/flink.sh and bench/nexmark_flink.sh, from their runs.

argv: HEADING RUNS [nexmark]. HEADING is the text above the table (command,
machine, commit); RUNS holds one record per line, tab-separated: query, kind
and a JSON object. Kinds: events ({"events": N}), check (both engines' row
counts and whether their rows are equal by value), eddy and flink (a timed
run each, with its peak resident memory), flink-cold (Flink's first run),
flink-peak (the JVM's lifetime peak, not shown), flink-heap (the smallest
heap Flink ran the query in, with FIND_HEAP=1), flink-failed. Prints
markdown: per query, rows out, events/s for each engine as median
(min-max), eddy's over Flink's (medians) and the worst pair (eddy's
slowest run over Flink's fastest), events per CPU-second for each and their
ratio, the median peak memory per job (eddy's process; Flink's JVM, its
high-water mark reset as each job starts, so it holds what the JVM kept
from earlier jobs and what the job added); with `nexmark`, also the Nexmark
repository's published Flink figure per core. Exits 1 when a query's rows
differ (q12 of Nexmark, which windows by processing time, excepted).
"""
import json
import statistics
import sys

# The Nexmark repository's published Flink results (README.md, "Nexmark
# Benchmark Result", github.com/nexmark/nexmark at 0c6d9cf): Flink 1.13,
# 3 workers of 8 cores, parallelism 8, RocksDB with incremental checkpoints
# every 3 minutes (exactly once), 100M events at 10M/s; Throughput/Cores.
PUBLISHED = {
    "q0": 155.02, "q1": 157.94, "q2": 175.21, "q3": 152.12, "q4": 34.33,
    "q5": 22.14, "q7": 12.33, "q8": 146.14, "q9": 14.24, "q10": 57.81,
    "q11": 39.7, "q12": 75.67, "q13": 130.73, "q14": 161.23, "q15": 72.42,
    "q16": 18.65, "q17": 116.8, "q18": 53.7, "q19": 44.04, "q20": 18.98,
    "q21": 98.49, "q22": 129.96,
}
UNCHECKED = {"q12": "processing-time windows"}
# Queries whose rows are compared on some columns only (bench/nexmark_flink.sh).
PARTLY_CHECKED = {"q18": "auction, bidder and dateTime compared: the bid kept among ties is left open"}


def checkpoints(runs):
    """The median of the runs' completed checkpoints ("-" where not counted)."""
    counts = [r["checkpoints"] for r in runs if r.get("checkpoints") is not None]
    return f"{statistics.median(counts):g}" if counts else "-"


def k(v):
    return f"{v / 1e3:,.0f}k"


def spread(values):
    m = statistics.median(values)
    return f"{k(m)} ({k(min(values))}-{k(max(values))})", m


def main():
    heading, runs_path = sys.argv[1], sys.argv[2]
    nexmark = sys.argv[3:] == ["nexmark"]
    records, order = {}, []
    for line in open(runs_path):
        query, kind, figures = line.rstrip("\n").split("\t", 2)
        if query not in records:
            records[query] = {}
            order.append(query)
        records[query].setdefault(kind, []).append(json.loads(figures))
    print(open(heading).read().rstrip("\n"))
    print()
    head = ["query", "rows out eddy / Flink", "eddy events/s", "Flink events/s (warm)",
            "Flink cold run", "eddy / Flink", "worst pair", "eddy events/CPU-s", "Flink events/CPU-s",
            "eddy / Flink per core"]
    head += ["Flink published per core"] if nexmark else []
    head += ["peak MiB per job, eddy / Flink JVM"]
    head += ["checkpoints per run, eddy / Flink"] if nexmark else []
    heaps = any("flink-heap" in r for r in records.values())
    head += ["Flink's smallest heap MiB"] if heaps else []
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    failed = False
    for q in order:
        r = records[q]
        # "q5, heap state": q5 under Flink's other state backend.
        base = q.split(",")[0]
        events = r["events"][0]["events"]
        if "flink-failed" in r:
            failure = r["flink-failed"][0]
            row = [q, f"{failure['eddy_rows']:,} / -", f"Flink failed: {failure['why']}"]
            print("| " + " | ".join(row + [""] * (len(head) - len(row))) + " |")
            continue
        check = r["check"][0]
        rows = f"{check['eddy_rows']:,} / {check['flink_rows']:,}"
        if not check["equal"]:
            if nexmark and base in UNCHECKED:
                rows += f" (not compared: {UNCHECKED[base]})"
            else:
                print(f"ERROR: {q}: eddy's and Flink's rows differ ({check['eddy_rows']} and "
                      f"{check['flink_rows']} rows; the differing rows are printed above)", file=sys.stderr)
                rows += " **differ**"
                failed = True
        elif nexmark and base in PARTLY_CHECKED:
            rows += f" ({PARTLY_CHECKED[base]})"
        eddy, flink = r["eddy"], r["flink"]
        eddy_speed, eddy_speed_m = spread([events / e["wall_seconds"] for e in eddy])
        flink_speed, flink_speed_m = spread([events / f["net_seconds"] for f in flink])
        cold = events / r["flink-cold"][0]["net_seconds"]
        eddy_core, eddy_core_m = spread([events / (e["user"] + e["sys"]) for e in eddy])
        flink_core, flink_core_m = spread([events / f["cpu_seconds"] for f in flink])
        peak_eddy = statistics.median(e["peak_kib"] for e in eddy) / 1024
        # Each warm job's own peak (the JVM's high-water mark reset as the
        # job starts), as eddy's is its process's for its one job.
        peak_flink = statistics.median(f["peak_kib"] for f in flink) / 1024
        # eddy's slowest run against Flink's fastest warm run.
        worst = min(events / e["wall_seconds"] for e in eddy) / max(events / f["net_seconds"] for f in flink)
        row = [q, rows, eddy_speed, flink_speed, k(cold), f"**{eddy_speed_m / flink_speed_m:.1f}x**", f"{worst:.1f}x",
               eddy_core, flink_core, f"**{eddy_core_m / flink_core_m:.1f}x**"]
        if nexmark:
            row.append(f"{PUBLISHED[base]:g}k" if base in PUBLISHED else "-")
        row.append(f"{peak_eddy:.0f} / {peak_flink:.0f}")
        if nexmark:
            row.append(f"{checkpoints(eddy)} / {checkpoints(flink)}")
        if heaps:
            heap = r.get("flink-heap", [None])[0]
            row.append(f"{heap['heap_mib']} (fails at {heap['fails_mib']})" if heap else "-")
        print("| " + " | ".join(row) + " |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
