"""The inputs of the spilling benchmarks (bench/spill.sh, bench/spill_flink.sh),
as NDJSON files in DIR, the same for a seed whatever reads them.

    python3 spill_input.py DIR QUERY KEYS EVENTS

QUERY:
- group: DIR/events.ndjson, EVENTS rows {"k", "v"} on KEYS keys drawn
  uniformly (so a spilled group is read back as often as any other);
- window (and session, over): DIR/events.ndjson, the same with "at_ms",
  spread over 100 s of event time and up to 5 s out of order;
- interval: DIR/orders.ndjson, EVENTS/2 orders 1 ms apart, and
  DIR/payments.ndjson, 0 to 2 payments per order, each 40 s before to 120 s
  after it, sorted by time;
- join: DIR/orders.ndjson, EVENTS/2 orders with distinct ids, and
  DIR/payments.ndjson, EVENTS/2 payments on orders drawn uniformly.
"""
import random
import sys


def main():
    work, query, keys, events = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(7)
    if query == "group":
        with open(f"{work}/events.ndjson", "w") as out:
            for _ in range(events):
                out.write('{"k":"key-%d","v":%d}\n' % (rng.randrange(keys), rng.randrange(1000)))
    elif query in ("window", "session", "over"):
        with open(f"{work}/events.ndjson", "w") as out:
            for i in range(events):
                at = 1_700_000_000_000 + i * 100_000 // events + rng.randrange(5000)
                out.write('{"k":"key-%d","v":%d,"at_ms":%d}\n' % (rng.randrange(keys), rng.randrange(1000), at))
    elif query == "interval":
        orders, start, payments = events // 2, 1_700_000_000_000, []
        with open(f"{work}/orders.ndjson", "w") as out:
            for i in range(orders):
                out.write('{"id":"order-%d","amount":%d,"at_ms":%d}\n' % (i, i % 1000, start + i))
                for copy in range(rng.randrange(3)):
                    payments.append((start + i - 40_000 + copy * 60_000 + rng.randrange(100_000), i))
        payments.sort()
        with open(f"{work}/payments.ndjson", "w") as out:
            for at, i in payments:
                out.write('{"id":"order-%d","paid":%d,"at_ms":%d}\n' % (i, rng.randrange(1000), at))
    elif query == "join":
        orders = events // 2
        with open(f"{work}/orders.ndjson", "w") as out:
            for i in range(orders):
                out.write('{"id":"order-%d","amount":%d}\n' % (i, i % 1000))
        with open(f"{work}/payments.ndjson", "w") as out:
            for _ in range(events - orders):
                out.write('{"id":"order-%d","paid":%d}\n' % (rng.randrange(orders), rng.randrange(1000)))
    else:
        sys.exit(f"spill_input.py: QUERY is group, window, session, over, interval or join, not {query}")


if __name__ == "__main__":
    main()
