-- origin: https://github.com/ArroyoSystems/arroyo/blob/master/crates/arroyo-planner/src/test/queries/watermarks.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE orders (
  customer_id INT,
  order_id INT,
  date_string TEXT,
  timestamp TIMESTAMP GENERATED ALWAYS AS (CAST(date_string as TIMESTAMP)),
  watermark FOR timestamp as timestamp - INTERVAL '5 seconds'
) WITH (connector = 'file', path = '${DATA}/arroyo_orders.ndjson');

CREATE TABLE users (
  customer_id INT,
  timestamp TIMESTAMP,
  watermark FOR timestamp
) WITH (connector = 'file', path = '${DATA}/arroyo_orders.ndjson');

select * from orders;
