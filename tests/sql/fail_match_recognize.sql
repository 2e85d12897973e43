-- fail: fail_match_recognize.sql:9:22: MATCH_RECOGNIZE: its input needs event time
-- Rows are matched in event-time order: an input without a watermark is
-- refused at MATCH_RECOGNIZE, naming why.
CREATE TABLE clicks (
  user_id VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT
) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
SELECT * FROM clicks MATCH_RECOGNIZE (
  PARTITION BY user_id ORDER BY ts
  MEASURES A.amount AS first_amount
  ONE ROW PER MATCH
  PATTERN (A B)
  DEFINE A AS A.amount > 0, B AS B.amount > A.amount
) AS M;
