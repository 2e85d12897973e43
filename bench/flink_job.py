"""One query of bench/flink.sh run by Apache Flink (PyFlink Table API, streaming
mode, MiniCluster), as eddy's `eddy bench` runs it: the same NDJSON files, the
same SQL, a blackhole sink. Prints one JSON line: the job's net runtime (what
Flink itself reports, without JVM start and planning), events/s over it, and
the JVM's peak resident memory.

    python flink_job.py QUERY PARALLELISM ORDERS.ndjson PAYMENTS.ndjson
"""

import json
import os
import sys

from pyflink.table import EnvironmentSettings, TableEnvironment

QUERIES = {
    "window": """
        INSERT INTO window_out
        SELECT window_start, customer_id, count(*), sum(order_amount)
        FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, customer_id""",
    "hop": """
        INSERT INTO window_out
        SELECT window_start, customer_id, count(*), sum(order_amount)
        FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' SECOND))
        GROUP BY window_start, window_end, customer_id""",
    "group": """
        INSERT INTO group_out
        SELECT customer_id, count(*), sum(order_amount) FROM orders GROUP BY customer_id""",
    "left_join": """
        INSERT INTO join_out
        SELECT p.payment_id, o.customer_id, ABS(p.paid_amount - o.order_amount) > 0.01
        FROM payments p LEFT JOIN orders o ON p.order_id = o.order_id""",
    "join": """
        INSERT INTO join_out
        SELECT p.payment_id, o.customer_id, ABS(p.paid_amount - o.order_amount) > 0.01
        FROM payments p LEFT JOIN orders o
          ON p.order_id = o.order_id
         AND o.ts BETWEEN p.ts - INTERVAL '10' SECOND AND p.ts + INTERVAL '10' SECOND""",
}


def count_lines(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def jvm_peak_kib():
    """VmHWM of the JVM, a child of this process (the largest child's)."""
    peak = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                children = f.read().split()
        except OSError:
            continue
        for pid in children:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak = max(peak, int(line.split()[1]))
            except OSError:
                pass
    return peak


def main():
    query, parallelism, orders, payments = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", parallelism)
    env.execute_sql(f"""
        CREATE TABLE orders (
          order_id STRING, customer_id STRING, order_amount DOUBLE, order_ts BIGINT, country STRING,
          ts AS TO_TIMESTAMP_LTZ(order_ts, 3),
          WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
        ) WITH ('connector' = 'filesystem', 'path' = '{orders}', 'format' = 'json')""")
    env.execute_sql(f"""
        CREATE TABLE payments (
          payment_id STRING, order_id STRING, paid_amount DOUBLE, payment_ts BIGINT, `method` STRING,
          ts AS TO_TIMESTAMP_LTZ(payment_ts, 3),
          WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
        ) WITH ('connector' = 'filesystem', 'path' = '{payments}', 'format' = 'json')""")
    env.execute_sql("""
        CREATE TABLE window_out (window_start TIMESTAMP(3), customer_id STRING, n BIGINT, total DOUBLE)
        WITH ('connector' = 'blackhole')""")
    env.execute_sql("""
        CREATE TABLE join_out (payment_id STRING, customer_id STRING, mismatch BOOLEAN)
        WITH ('connector' = 'blackhole')""")
    env.execute_sql("""
        CREATE TABLE group_out (customer_id STRING, n BIGINT, total DOUBLE)
        WITH ('connector' = 'blackhole')""")
    if query == "group":
        # Flink's best form for an updating aggregate: mini-batches with
        # local-global aggregation.
        config = env.get_config()
        config.set("table.exec.mini-batch.enabled", "true")
        config.set("table.exec.mini-batch.allow-latency", "1 s")
        config.set("table.exec.mini-batch.size", "5000")
        config.set("table.optimizer.agg-phase-strategy", "TWO_PHASE")
    result = env.execute_sql(QUERIES[query])
    net_ms = result.get_job_client().get_job_execution_result().result().get_net_runtime()
    events = count_lines(orders) + (count_lines(payments) if "join" in query else 0)
    print(json.dumps({
        "engine": "flink",
        "query": query,
        "parallelism": int(parallelism),
        "events": events,
        "net_runtime_ms": net_ms,
        "rows_per_second": events / (net_ms / 1000.0),
        "peak_rss_bytes": jvm_peak_kib() * 1024,
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
