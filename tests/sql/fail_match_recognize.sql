-- fail: fail_match_recognize.sql:8:1: eddy cannot run MATCH_RECOGNIZE (row pattern recognition) yet
-- A construct eddy has no plan for is named, not dumped as a syntax tree.
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
