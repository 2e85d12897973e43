-- fail: clicks_bad.ndjson:4 (bad_rows = 'fail'): column 'amount': failed to parse "lots" as Float64
-- With bad_rows = 'fail' the job stops at the first bad row, naming its line.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks_bad.ndjson', bad_rows = 'fail');

SELECT user_id, page, amount FROM clicks;
