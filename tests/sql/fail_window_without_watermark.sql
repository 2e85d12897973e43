-- fail: fail_window_without_watermark.sql:4:8: a window needs event time
CREATE TABLE plain (k VARCHAR, ts BIGINT) WITH (connector = 'file', path = 'unused.ndjson');

SELECT tumble(INTERVAL '1' SECOND) AS w, k, count(*) FROM plain GROUP BY w, k;
