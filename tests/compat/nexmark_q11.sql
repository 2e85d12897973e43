-- origin: https://github.com/nexmark/nexmark/blob/master/nexmark-flink/src/main/resources/queries/q11.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  ts BIGINT, extra VARCHAR,
  dateTime AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (connector = 'file', path = '${DATA}/nexmark_bid.ndjson');

SELECT
    B.bidder,
    count(*) as bid_count,
    SESSION_START(B.dateTime, INTERVAL '10' SECOND) as starttime,
    SESSION_END(B.dateTime, INTERVAL '10' SECOND) as endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.dateTime, INTERVAL '10' SECOND);
