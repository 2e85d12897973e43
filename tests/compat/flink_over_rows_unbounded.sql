-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/over-agg/ (ROWS interval, UNBOUNDED PRECEDING)
-- expected: worked out from the input by check_expected.py

CREATE TABLE Orders (
  user BIGINT,
  product STRING,
  amount INT,
  order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '1' MINUTE
) WITH (connector = 'file', path = '${DATA}/flink_orders.ndjson');

SELECT product, order_time, amount,
  SUM(amount) OVER (
    PARTITION BY product
    ORDER BY order_time
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
  ) AS running_amount
FROM Orders;
