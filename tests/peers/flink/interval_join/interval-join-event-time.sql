-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/IntervalJoinTestPrograms.java (INTERVAL_JOIN_EVENT_TIME, "interval-join-event-time")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[1, 2020-04-15 08:00:01, 2020-04-15 08:00:02]
-- expect: +I[2, 2020-04-15 08:00:02, 2020-04-15 08:00:05]
-- expect: +I[5, 2020-04-15 08:00:05, 2020-04-15 08:00:06]
-- expect: +I[10, 2020-04-15 08:00:11, 2020-04-15 08:00:16]

CREATE TABLE orders_t (
  id INT,
  order_ts_str STRING,
  order_ts AS TO_TIMESTAMP(order_ts_str),
  WATERMARK for `order_ts` AS `order_ts` - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/orders_t.ndjson');

CREATE TABLE shipments_t (
  id INT,
  order_id INT,
  shipment_ts_str STRING,
  shipment_ts AS TO_TIMESTAMP(shipment_ts_str),
  WATERMARK for `shipment_ts` AS `shipment_ts` - INTERVAL '1' SECOND
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
 WHERE o.order_ts BETWEEN s.shipment_ts - INTERVAL '5' SECOND AND s.shipment_ts + INTERVAL '5' SECOND;
