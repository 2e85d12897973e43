-- Arroyo's memory table: a table declared without a connector passes the
-- rows inserted into it (by two queries here) to the queries that read it,
-- with their event time, so a window over it closes as the source's do.
-- Arroyo's spelling of the watermark (in parentheses) and a sink declared
-- without columns (it takes the query's) as written.
CREATE TABLE clicks (
  user_id VARCHAR, page VARCHAR, amount DOUBLE, ts BIGINT,
  event_time TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS (event_time - INTERVAL '2' SECOND)
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

CREATE TABLE spend (who VARCHAR, cents BIGINT, event_time TIMESTAMP(3));

CREATE TABLE per_window WITH (connector = 'stdout', tag = 'SPEND');

INSERT INTO spend SELECT user_id, CAST(amount * 100 AS BIGINT), event_time FROM clicks WHERE page = 'home';
INSERT INTO spend SELECT upper(user_id), CAST(amount AS BIGINT), event_time FROM clicks WHERE page = 'cart';

INSERT INTO per_window
SELECT w.start AS window_start, who, n, total FROM (
  SELECT tumble(INTERVAL '10' SECOND) AS w, who, count(*) AS n, sum(cents) AS total
  FROM spend GROUP BY 1, 2);
