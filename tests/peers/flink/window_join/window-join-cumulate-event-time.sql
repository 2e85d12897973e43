-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/WindowJoinTestPrograms.java (WINDOW_JOIN_CUMULATE_EVENT_TIME, "window-join-cumulate-event-time")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:05, a, L1, 1, R1, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:05, a, L7, 5, R1, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L1, 1, R1, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L1, 1, R9, 3]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L1, 1, R4, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L7, 5, R1, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L7, 5, R9, 3]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L7, 5, R4, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L9, 3, R1, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L9, 3, R9, 3]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L9, 3, R4, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L4, 5, R1, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L4, 5, R9, 3]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, a, L4, 5, R4, 5]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, b, L8, 3, R2, 7]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, b, L8, 3, R8, 8]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, b, L8, 3, R6, 6]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, b, L6, 6, R2, 7]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, b, L6, 6, R8, 8]
-- expect: +I[2020-10-10T00:00, 2020-10-10T00:00:10, b, L6, 6, R6, 6]
-- expect: +I[2020-10-10T00:00:30, 2020-10-10T00:00:35, b, L12, 1, R33, 1]
-- expect: +I[2020-10-10T00:00:30, 2020-10-10T00:00:40, b, L12, 1, R33, 1]
-- expect: +I[2020-10-10T00:00:40, 2020-10-10T00:00:45, c, L43, 12, R42, 11]
-- expect: +I[2020-10-10T00:00:40, 2020-10-10T00:00:50, c, L43, 12, R42, 11]

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

INSERT INTO sink_t SELECT
L.window_start AS window_start,
L.window_end AS window_end,
L.name AS name,
L.id AS L_id,
L.num AS L_num,
R.id AS R_id,
R.num AS R_num
FROM
(
    SELECT * FROM TABLE(CUMULATE(TABLE source_one_t, DESCRIPTOR(row_time), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
) L
JOIN
(
    SELECT * FROM TABLE(CUMULATE(TABLE source_two_t, DESCRIPTOR(row_time), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
) R
ON L.name = R.name
AND L.window_start = R.window_start
AND L.window_end = R.window_end;
