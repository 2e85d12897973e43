-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/WindowRankTestPrograms.java (WINDOW_RANK_HOP_TVF_NAMED_MIN_TOP_1, "window-rank-hop-tvf-named-min-top-n")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[2020-04-15T08:00:05, supplier1]
-- expect: +I[2020-04-15T08:00:05, supplier1]

CREATE TABLE bid_t (
  ts STRING,
  price DECIMAL(10,2),
  supplier_id STRING,
  `bid_time` AS TO_TIMESTAMP(`ts`),
  WATERMARK for `bid_time` AS `bid_time` - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/bid_t_one.ndjson');

CREATE TABLE sink_t (
  bid_time TIMESTAMP(3),
  supplier_id STRING
) WITH (connector = 'stdout');

INSERT INTO sink_t(bid_time, supplier_id) SELECT bid_time, supplier_id
  FROM (
    SELECT
         bid_time,
         supplier_id,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price ASC) AS row_num
    FROM TABLE(HOP(
      DATA => TABLE bid_t,
      TIMECOL => DESCRIPTOR(`bid_time`),
      SLIDE => INTERVAL '5' SECOND,
      SIZE => INTERVAL '10' SECOND))
  ) WHERE row_num <= 3;
