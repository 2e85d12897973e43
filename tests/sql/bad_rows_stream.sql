-- bad_rows(t): every malformed line once, with its line number, column and
-- reason; the good rows flow as if the bad ones had never come.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  page    VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/clicks_bad.ndjson');

CREATE TABLE dead_letters (
  line BIGINT, column_name VARCHAR, reason VARCHAR, raw VARCHAR
) WITH (connector = 'stdout', tag = 'BAD');

INSERT INTO dead_letters SELECT line, column_name, reason, raw FROM bad_rows(clicks);

SELECT w.start AS window_start, n
FROM (SELECT tumble(INTERVAL '2' SECOND) AS w, count(*) AS n FROM clicks GROUP BY w);
