-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/TemporalJoinTestPrograms.java (TEMPORAL_JOIN_TABLE_JOIN, "temporal-join-table-join")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[102]
-- expect: +I[228]
-- expect: +I[348]
-- expect: +I[50]
-- expect: +I[103]
-- expect: +I[119]

CREATE TABLE Orders (
  amount bigint,
  currency STRING,
  order_time STRING,
  rowtime as TO_TIMESTAMP(order_time) ,
  WATERMARK FOR rowtime AS rowtime
) WITH (connector = 'file', path = '${DATA}/Orders.ndjson');

CREATE TABLE RatesHistory (
  currency STRING,
  rate bigint,
  rate_time STRING,
  rowtime as TO_TIMESTAMP(rate_time) ,
  WATERMARK FOR rowtime AS rowtime,
  PRIMARY KEY(currency) NOT ENFORCED
) WITH (connector = 'file', path = '${DATA}/RatesHistory.ndjson');

CREATE TABLE MySink (
  amount bigint
) WITH (connector = 'stdout');

INSERT INTO MySink SELECT amount * r.rate FROM Orders AS o JOIN RatesHistory FOR SYSTEM_TIME AS OF o.rowtime AS r ON o.currency = r.currency;
