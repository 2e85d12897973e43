-- Flink's legacy group windows: GROUP BY TUMBLE(ts, size) / HOP(ts, slide,
-- size) with TUMBLE_START/_END/_ROWTIME and HOP_START/_END, planned as
-- eddy's tumble/hop windows over the table's event time. Same windows as
-- tumble_aggregates.sql and hop_windows.sql, in Flink's spelling.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP(3) GENERATED ALWAYS AS (TO_TIMESTAMP_LTZ(ts, 3)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT user_id,
       TUMBLE_START(event_time, INTERVAL '5' SECOND) AS window_start,
       TUMBLE_END(event_time, INTERVAL '5' SECOND) AS window_end,
       TUMBLE_ROWTIME(event_time, INTERVAL '5' SECOND) AS window_time,
       COUNT(*) AS n, ROUND(SUM(amount), 2) AS total
FROM clicks
GROUP BY TUMBLE(event_time, INTERVAL '5' SECOND), user_id;

SELECT HOP_START(event_time, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS window_start,
       HOP_END(event_time, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS window_end,
       COUNT(*) AS n
FROM clicks
GROUP BY HOP(event_time, INTERVAL '2' SECOND, INTERVAL '6' SECOND);
