-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/WindowDeduplicateTestPrograms.java (WINDOW_DEDUPLICATE_ASC_CUMULATE_FIRST_ROW, "window-deduplicate-asc-cumulate-first-row")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[2020-04-15T08:00:05, 4.00, A, supplier1, 2020-04-15T08:00, 2020-04-15T08:00:10, 1]
-- expect: +I[2020-04-15T08:00:11, 2.00, B, supplier3, 2020-04-15T08:00:10, 2020-04-15T08:00:15, 1]
-- expect: +I[2020-04-15T08:00:11, 2.00, B, supplier3, 2020-04-15T08:00:10, 2020-04-15T08:00:20, 1]
-- expect: +I[2020-04-15T08:00:21, 2.00, B, supplier7, 2020-04-15T08:00:20, 2020-04-15T08:00:25, 1]
-- expect: +I[2020-04-15T08:00:21, 2.00, B, supplier7, 2020-04-15T08:00:20, 2020-04-15T08:00:30, 1]

CREATE TABLE bid_t (
  ts STRING,
  price DECIMAL(10,2),
  item STRING,
  supplier_id STRING,
  `bid_time` AS TO_TIMESTAMP(`ts`),
  `proc_time` AS PROCTIME(),
  WATERMARK for `bid_time` AS `bid_time` - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/bid_t.ndjson');

CREATE TABLE sink_t (
  bid_time TIMESTAMP(3),
  price DECIMAL(10,2),
  item STRING,
  supplier_id STRING,
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  row_num BIGINT
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT *
  FROM (
    SELECT
         bid_time,
         price,
         item,
         supplier_id,
         window_start,
         window_end, 
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY bid_time ASC) AS row_num
    FROM TABLE(CUMULATE(TABLE bid_t, DESCRIPTOR(bid_time), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
  ) WHERE row_num <= 1;
