-- An updating aggregate: count and sum per customer over every order, no
-- window (each change revises the customer's row).
CREATE TABLE group_out (customer_id STRING, n BIGINT, total DOUBLE)
WITH ('connector' = 'blackhole');

INSERT INTO group_out
SELECT customer_id, count(*), sum(order_amount) FROM orders GROUP BY customer_id;
