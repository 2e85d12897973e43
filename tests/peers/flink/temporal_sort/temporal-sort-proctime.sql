-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/TemporalSortTestPrograms.java (TEMPORAL_SORT_PROCTIME, "temporal-sort-proctime")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- ordered: the rows must come in this order
-- expect: +I[1]
-- expect: +I[2]
-- expect: +I[3]
-- expect: +I[4]
-- expect: +I[5]

CREATE TABLE source_t (
  a INT,
  b BIGINT,
  c STRING,
  `proctime` as PROCTIME()
) WITH (connector = 'file', path = '${DATA}/source_proc.ndjson');

CREATE TABLE sink_t (
  a INT
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT a from source_t ORDER BY proctime;
