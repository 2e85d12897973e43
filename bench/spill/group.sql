-- An updating aggregate whose state grows with the keys: a row per key,
-- revised by every event on it.
CREATE TABLE totals (k STRING, n BIGINT, total BIGINT, mean DOUBLE)
WITH ('connector' = 'blackhole');

INSERT INTO totals SELECT k, count(*), sum(v), avg(CAST(v AS DOUBLE)) FROM events GROUP BY k;
