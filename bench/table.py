#!/usr/bin/env python3
"""The table of bench/datafusion.sh, from its runs.

argv: HEADING RUNS. HEADING is the text above the table (command, machine,
commit); RUNS holds one line per run: query, results, contestant and the
`eddy bench` JSON line, tab-separated. Prints markdown: per query and
results, each contestant's events/s as median (min-max) over its runs, and
eddy's median over the fastest DataFusion form's. Exits 1 when two
contestants of one query and results gave different row counts.
"""
import json
import statistics
import sys


def millions(v):
    return f"{v / 1e6:.2f}M"


def main():
    heading, runs_path = sys.argv[1], sys.argv[2]
    runs = {}
    order = []
    for line in open(runs_path):
        query, results, contestant, figures = line.rstrip("\n").split("\t", 3)
        key = (query, results)
        if key not in runs:
            runs[key] = {}
            order.append(key)
        runs[key].setdefault(contestant, []).append(json.loads(figures))
    forms = []
    for key in order:
        for c in runs[key]:
            if c != "eddy" and c not in forms:
                forms.append(c)
    print(open(heading).read().rstrip("\n"))
    print()
    head = ["query", "results", "eddy events/s"] + [f"{c} events/s" for c in forms]
    head += ["eddy / fastest DataFusion", "peak RSS MiB eddy / that DataFusion"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    failed = False
    for key in order:
        by = runs[key]
        outputs = {c: {r["output_rows"] for r in rs} for c, rs in by.items()}
        if len({n for rows in outputs.values() for n in rows}) > 1:
            print(f"ERROR: {key[0]} ({key[1]}): output rows differ: {outputs}", file=sys.stderr)
            failed = True

        def cell(c):
            rs = by.get(c)
            if not rs:
                return "", None
            speeds = [r["rows_per_second"] for r in rs]
            m = statistics.median(speeds)
            return f"{millions(m)} ({millions(min(speeds))}-{millions(max(speeds))})", m

        def peak(c):
            return statistics.median(r["peak_rss_bytes"] for r in by[c]) / 1048576

        eddy_cell, eddy_median = cell("eddy")
        rivals = [(cell(c)[1], c) for c in forms if c in by]
        best_median, best = max(rivals)
        row = [key[0], key[1], eddy_cell] + [cell(c)[0] for c in forms]
        row += [f"**{eddy_median / best_median:.2f}x** ({best})", f"{peak('eddy'):.0f} / {peak(best):.0f}"]
        print("| " + " | ".join(row) + " |")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
