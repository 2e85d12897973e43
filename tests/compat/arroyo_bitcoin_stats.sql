-- origin: https://github.com/ArroyoSystems/arroyo/blob/master/crates/arroyo-planner/src/test/queries/bitcoin_stats.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE coinbase (
    type TEXT,
    product_id TEXT,
    price FLOAT,
    ts BIGINT,
    event_time AS TO_TIMESTAMP_LTZ(ts, 3),
    WATERMARK FOR event_time
) WITH (connector = 'file', path = '${DATA}/coinbase.ndjson');

create view stats as (
SELECT
 tumble('5 seconds') as window,
 product_id,
 first_value(price) AS open,
 max(price) AS high,
 min(price) AS low,
 last_value(price) AS close
FROM
 coinbase
GROUP BY
 1, 2);

select window.start, product_id, open, high, low, close
from stats
where product_id is not null;
