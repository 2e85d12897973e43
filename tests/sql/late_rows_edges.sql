-- The lateness rule at its edges. Bound 2 s: with max 10 000 seen, 8 000 is
-- on time and 7 999 is late; after 12 000, 9 000 is on time with 1 s of
-- allowed lateness (9 000 >= 12 000 - 2 000 - 1 000) and late without it.
CREATE TABLE strict (
  id BIGINT, ts BIGINT,
  et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR et AS et - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/lateness_edges.ndjson');

CREATE TABLE lenient (
  id BIGINT, ts BIGINT,
  et TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR et AS et - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${DATA}/lateness_edges.ndjson', allowed_lateness = '1 second');

CREATE TABLE rows_seen (tbl VARCHAR, path VARCHAR, id BIGINT, watermark_ms BIGINT, lag_ms BIGINT)
WITH (connector = 'stdout', tag = 'ROW', omit_nulls = 'true');

INSERT INTO rows_seen (tbl, path, id) SELECT 'strict', 'on_time', id FROM strict;
INSERT INTO rows_seen SELECT 'strict', 'late', id, watermark_ms, lag_ms FROM late_rows(strict);
INSERT INTO rows_seen (tbl, path, id) SELECT 'lenient', 'on_time', id FROM lenient;
INSERT INTO rows_seen SELECT 'lenient', 'late', id, watermark_ms, lag_ms FROM late_rows(lenient);
