-- Nexmark q12 (processing-time windows: bids per bidder every 10 seconds of wall clock), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q12.sql);
-- reads the views of ddl.sql.
-- Not repeatable: which window a bid falls in depends on when it is read.
CREATE TABLE nexmark_q12 (
  bidder BIGINT, bid_count BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

CREATE VIEW B AS SELECT *, PROCTIME() AS p_time FROM bid;

INSERT INTO nexmark_q12
SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime
FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(p_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;
