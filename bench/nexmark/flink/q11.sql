-- Nexmark q11 (user sessions: legacy session group windows), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q11.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q11 (
  bidder BIGINT, bid_count BIGINT, starttime TIMESTAMP(3), endtime TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q11
SELECT B.bidder, count(*) AS bid_count,
       SESSION_START(B.`dateTime`, INTERVAL '10' SECOND) AS starttime,
       SESSION_END(B.`dateTime`, INTERVAL '10' SECOND) AS endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.`dateTime`, INTERVAL '10' SECOND);
