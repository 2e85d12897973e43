-- origin: https://github.com/ArroyoSystems/arroyo/blob/master/crates/arroyo-planner/src/test/queries/tvf_hop.sql
-- expected: worked out from the input by check_expected.py

CREATE TABLE logs (
    ip TEXT,
    user_id TEXT,
    timestamp TIMESTAMP,
    request TEXT,
    size INT,
    WATERMARK FOR timestamp AS timestamp - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/logs.ndjson');

SELECT count(*), sum(size)  FROM
    HOP(logs, timestamp, INTERVAL '5 MINUTES', INTERVAL '10 MINUTES');
