-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/IntervalJoinTestPrograms.java (INTERVAL_JOIN_PROC_TIME, "interval-join-proc-time")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[1, 2020-04-15 08:00:01, 2020-04-15 08:00:02]
-- expect: +I[2, 2020-04-15 08:00:02, 2020-04-15 08:00:05]
-- expect: +I[5, 2020-04-15 08:00:05, 2020-04-15 08:00:06]
-- expect: +I[4, 2020-04-15 08:00:04, 2020-04-15 08:00:15]
-- expect: +I[7, 2020-04-15 08:00:09, 2020-04-15 08:00:16]
-- expect: +I[10, 2020-04-15 08:00:11, 2020-04-15 08:00:16]

CREATE TABLE orders_t (
  id INT,
  order_ts_str STRING,
  proc_time AS PROCTIME()
) WITH (connector = 'file', path = '${DATA}/orders_t.ndjson');

CREATE TABLE shipments_t (
  id INT,
  order_id INT,
  shipment_ts_str STRING,
  `proc_time` AS PROCTIME()
) WITH (connector = 'file', path = '${DATA}/shipments_t.ndjson');

CREATE TABLE sink_t (
  order_id INT,
  order_ts_str STRING,
  shipment_ts_str STRING
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT
     o.id AS order_id,
     o.order_ts_str,
     s.shipment_ts_str
 FROM orders_t o
 JOIN shipments_t s ON o.id = s.order_id
 WHERE o.proc_time BETWEEN s.proc_time - INTERVAL '5' SECOND AND s.proc_time + INTERVAL '5' SECOND;
