-- origin: https://github.com/nexmark/nexmark/blob/master/nexmark-flink/src/main/resources/queries/q3.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE auction (
  id BIGINT, itemName VARCHAR, description VARCHAR, initialBid BIGINT, reserve BIGINT,
  ts BIGINT, expires BIGINT, seller BIGINT, category BIGINT, extra VARCHAR,
  dateTime AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (connector = 'file', path = '${DATA}/nexmark_auction.ndjson');
CREATE TABLE person (
  id BIGINT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR,
  ts BIGINT, extra VARCHAR,
  dateTime AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND
) WITH (connector = 'file', path = '${DATA}/nexmark_person.ndjson');

SELECT
    P.name, P.city, P.state, A.id
FROM
    auction AS A INNER JOIN person AS P on A.seller = P.id
WHERE
    A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
