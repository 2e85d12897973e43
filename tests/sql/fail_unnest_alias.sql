-- fail: fail_unnest_alias.sql:8:40: name the column UNNEST makes, one name per array: UNNEST(tags) AS u(name)
CREATE TABLE orders (
  order_id VARCHAR,
  tags     ARRAY<STRING>,
  ts       TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/tagged_orders.ndjson');
SELECT order_id FROM orders CROSS JOIN UNNEST(tags);
