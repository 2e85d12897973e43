-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/GroupWindowAggregateTestPrograms.java (GROUP_HOP_WINDOW_EVENT_TIME, "group-window-aggregate-hop-event-time")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[a, 4]
-- expect: +I[b, 2]
-- expect: +I[a, 6]
-- expect: +I[a, 1]
-- expect: +I[b, 2]
-- expect: +I[b, 1]
-- expect: +I[b, 1]
-- expect: +I[b, 1]
-- expect: +I[null, 1]
-- expect: +I[b, 1]
-- expect: +I[null, 1]
-- expect: +I[a, 1]
-- expect: +I[d, 2]
-- expect: +I[c, 1]
-- expect: +I[a, 1]
-- expect: +I[c, 1]
-- expect: +I[d, 2]

CREATE TABLE source_t (
  ts STRING,
  a_int INT,
  b_double DOUBLE,
  c_float FLOAT,
  d_bigdec DECIMAL(10, 2),
  `comment` STRING,
  name STRING,
  `rowtime` AS TO_TIMESTAMP(`ts`),
  `proctime` AS PROCTIME(),
  WATERMARK for `rowtime` AS `rowtime` - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/source_t.ndjson');

CREATE TABLE sink_t (
  name STRING,
  cnt BIGINT
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT name, COUNT(*) FROM source_t GROUP BY name, HOP(rowtime, INTERVAL '5' SECOND, INTERVAL '10' SECOND);
