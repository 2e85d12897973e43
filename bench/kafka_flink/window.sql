-- A 1 s tumbling count per country, each result printed as it is made
-- (its latency is measured from the line's arrival).
CREATE TABLE window_out (country STRING, window_end TIMESTAMP(3), orders BIGINT)
WITH ('connector' = 'print');

INSERT INTO window_out
SELECT country, window_end, COUNT(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' SECOND))
GROUP BY country, window_start, window_end;
