-- origin: https://github.com/nexmark/nexmark/blob/master/nexmark-flink/src/main/resources/queries/q8.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE person (
  id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR,
  ts BIGINT, extra VARCHAR,
  dateTime AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (connector = 'file', path = '${DATA}/nexmark_person.ndjson');
CREATE TABLE auction (
  id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
  ts BIGINT, expires BIGINT, seller BIGINT, category BIGINT, extra VARCHAR,
  dateTime AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (connector = 'file', path = '${DATA}/nexmark_auction.ndjson');

SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name,
         window_start AS starttime,
         window_end AS endtime
  FROM TABLE(
             TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end
) P
JOIN (
  SELECT seller,
         window_start AS starttime,
         window_end AS endtime
  FROM TABLE(
             TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
