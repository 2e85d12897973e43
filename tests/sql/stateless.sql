-- Filters, projections, CASE, scalar functions and UNION ALL need no window.
CREATE TABLE clicks (
  user_id VARCHAR,
  page    VARCHAR,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson', format = 'json');

CREATE TABLE labelled (user_id VARCHAR, label VARCHAR, cents BIGINT, at TIMESTAMP)
WITH (connector = 'stdout', tag = 'LABELLED');

INSERT INTO labelled
SELECT upper(user_id), CASE WHEN amount > 40 THEN 'big' WHEN amount > 20 THEN 'mid' ELSE 'small' END,
       CAST(round(amount * 100) AS BIGINT), event_time
FROM clicks WHERE page = 'checkout'
UNION ALL
SELECT user_id, concat('page:', page), CAST(amount AS BIGINT), event_time
FROM clicks WHERE amount > 45;
