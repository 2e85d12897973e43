-- origin: https://nightlies.apache.org/flink/flink-docs-release-1.20/docs/dev/table/sql/queries/window-agg/ (Group Window Aggregation, HOP and SESSION)
-- expected: worked out from the input by check_expected.py

CREATE TABLE Orders (
  user BIGINT,
  product STRING,
  amount INT,
  order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '1' MINUTE
) WITH (connector = 'file', path = '${DATA}/flink_orders.ndjson');

SELECT
  user,
  HOP_END(order_time, INTERVAL '1' HOUR, INTERVAL '1' DAY) AS hEnd,
  SUM(amount) FROM Orders
GROUP BY
  HOP(order_time, INTERVAL '1' HOUR, INTERVAL '1' DAY),
  user;

SELECT
  user,
  SESSION_START(order_time, INTERVAL '12' HOUR) AS sStart,
  SESSION_ROWTIME(order_time, INTERVAL '12' HOUR) AS sEnd,
  SUM(amount)
FROM Orders
GROUP BY
  SESSION(order_time, INTERVAL '12' HOUR),
  user;
