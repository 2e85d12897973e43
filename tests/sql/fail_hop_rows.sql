-- fail: fail_hop_rows.sql:12:21: HOP(TABLE clicks, ...) without GROUP BY window_start, window_end is not supported: a row falls into several HOP windows (or, for SESSION, into one that later rows decide); aggregate with GROUP BY window_start, window_end, or use TUMBLE
-- Reading a HOP table function's rows without aggregating is named at the HOP.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time AS TO_TIMESTAMP_LTZ(ts, 3),
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');

SELECT * FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(event_time), INTERVAL '1' SECOND, INTERVAL '5' SECOND));
