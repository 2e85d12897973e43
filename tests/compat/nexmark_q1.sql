-- origin: https://github.com/nexmark/nexmark/blob/master/nexmark-flink/src/main/resources/queries/q1.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  ts BIGINT, extra VARCHAR,
  dateTime AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (connector = 'file', path = '${DATA}/nexmark_bid.ndjson');

SELECT
    auction,
    bidder,
    0.908 * price as price, -- convert dollar to euro
    dateTime,
    extra
FROM bid;
