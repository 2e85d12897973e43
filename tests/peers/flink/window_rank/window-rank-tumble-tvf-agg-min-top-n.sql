-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/WindowRankTestPrograms.java (WINDOW_RANK_TUMBLE_TVF_AGG_MIN_TOP_N, "window-rank-tumble-tvf-agg-min-top-n")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[2020-04-15T08:00, 2020-04-15T08:00:10, supplier3, 2.00, 1, 1]
-- expect: +I[2020-04-15T08:00, 2020-04-15T08:00:10, supplier2, 4.00, 1, 2]
-- expect: +I[2020-04-15T08:00, 2020-04-15T08:00:10, supplier4, 5.00, 1, 3]
-- expect: +I[2020-04-15T08:00:10, 2020-04-15T08:00:20, supplier1, 1.00, 1, 1]
-- expect: +I[2020-04-15T08:00:10, 2020-04-15T08:00:20, supplier3, 2.00, 1, 2]
-- expect: +I[2020-04-15T08:00:10, 2020-04-15T08:00:20, supplier2, 3.00, 1, 3]
-- expect: +I[2020-04-15T08:00:20, 2020-04-15T08:00:30, supplier4, 1.00, 1, 1]
-- expect: +I[2020-04-15T08:00:20, 2020-04-15T08:00:30, supplier7, 2.00, 1, 2]
-- expect: +I[2020-04-15T08:00:20, 2020-04-15T08:00:30, supplier3, 3.00, 1, 3]

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
  window_start TIMESTAMP(3),
  window_end TIMESTAMP(3),
  supplier_id STRING,
  total_price DECIMAL(10,2),
  cnt BIGINT,
  row_num BIGINT
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT *
  FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price ASC) as row_num
    FROM (
      SELECT window_start, window_end, supplier_id, SUM(price) as price, COUNT(*) as cnt
      FROM TABLE(TUMBLE(TABLE bid_t, DESCRIPTOR(bid_time), INTERVAL '10' SECOND))
      GROUP BY window_start, window_end, supplier_id
    )
  ) WHERE row_num <= 3;
