-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/topn/
-- expected: worked out from the input by check_expected.py (an updating query: its changelog replayed)

CREATE TABLE Orders (
  user BIGINT,
  product STRING,
  amount INT,
  order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '1' MINUTE
) WITH (connector = 'file', path = '${DATA}/flink_orders.ndjson');

SELECT *
FROM (
  SELECT *,
    ROW_NUMBER() OVER (PARTITION BY product ORDER BY amount DESC) AS row_num
  FROM Orders)
WHERE row_num <= 5;
