-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/TemporalSortTestPrograms.java (TEMPORAL_SORT_ROWTIME, "temporal-sort-rowtime")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- ordered: the rows must come in this order
-- expect: +I[1]
-- expect: +I[2]
-- expect: +I[6]
-- expect: +I[3]
-- expect: +I[5]
-- expect: +I[3]
-- expect: +I[4]
-- expect: +I[10]
-- expect: +I[11]

CREATE TABLE source_t (
  ts STRING,
  `int` INT,
  `double` DOUBLE,
  `rowtime` AS TO_TIMESTAMP(`ts`),
  WATERMARK for `rowtime` AS `rowtime` - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/source_t.ndjson');

CREATE TABLE sink_t (
  a INT
) WITH (connector = 'stdout');

insert into sink_t SELECT `int` FROM source_t order by rowtime, `double`;
