-- origin: https://github.com/nexmark/nexmark/blob/master/nexmark-flink/src/main/resources/queries/q7.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  ts BIGINT, extra VARCHAR,
  dateTime AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (connector = 'file', path = '${DATA}/nexmark_bid.ndjson');

SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
from bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end as dateTime
  FROM TABLE(
          TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE
  B.dateTime BETWEEN B1.dateTime  - INTERVAL '10' SECOND AND B1.dateTime;
