-- Hopping windows of 5 s every second (each order in five): orders counted
-- and summed per customer.
CREATE TABLE window_out (window_start TIMESTAMP(3), customer_id STRING, n BIGINT, total DOUBLE)
WITH ('connector' = 'blackhole');

INSERT INTO window_out
SELECT window_start, customer_id, count(*), sum(order_amount)
FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '5' SECOND))
GROUP BY window_start, window_end, customer_id;
