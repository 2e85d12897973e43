-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/WindowJoinTestPrograms.java (WINDOW_JOIN_SEMI_TUMBLE_EVENT_TIME, "window-join-semi-tumble-event-time")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:05, a, L1, 1, NOT_PRESENT, 0]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:05, a, L7, 5, NOT_PRESENT, 0]
-- expect: +I[2020-10-10T00:00:05, 2020-10-10T00:00:10, b, L8, 3, NOT_PRESENT, 0]
-- expect: +I[2020-10-10T00:00:05, 2020-10-10T00:00:10, b, L6, 6, NOT_PRESENT, 0]
-- expect: +I[2020-10-10T00:00:05, 2020-10-10T00:00:10, a, L9, 3, NOT_PRESENT, 0]
-- expect: +I[2020-10-10T00:00:30, 2020-10-10T00:00:35, b, L12, 1, NOT_PRESENT, 0]
-- expect: +I[2020-10-10T00:00:40, 2020-10-10T00:00:45, c, L43, 12, NOT_PRESENT, 0]

CREATE TABLE source_one_t (
  ts STRING,
  id STRING,
  num INT,
  name STRING,
  row_time AS TO_TIMESTAMP(`ts`),
  WATERMARK for `row_time` AS `row_time` - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/source_one_t.ndjson');

CREATE TABLE source_two_t (
  ts STRING,
  id STRING,
  num INT,
  name STRING,
  row_time AS TO_TIMESTAMP(`ts`),
  WATERMARK for `row_time` AS `row_time` - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/source_two_t.ndjson');

CREATE TABLE sink_t (
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  name STRING,
  L_id STRING,
  L_num INT,
  R_id STRING,
  R_num INT
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT window_start, window_end, name, id, num, 'NOT_PRESENT', 0
           FROM (
               SELECT * FROM TABLE(TUMBLE(TABLE source_one_t, DESCRIPTOR(row_time), INTERVAL '5' SECOND))
           ) L WHERE EXISTS (
             SELECT * FROM (   
               SELECT * FROM TABLE(TUMBLE(TABLE source_two_t, DESCRIPTOR(row_time), INTERVAL '5' SECOND))
             ) R              WHERE L.name = R.name AND L.window_start = R.window_start AND L.window_end = R.window_end);
