-- fail: fail_match_recognize_empty_pattern.sql:5:24: MATCH_RECOGNIZE: the pattern can match no rows at all
CREATE TABLE payments (card VARCHAR, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '${DATA}/card_payments.ndjson');
SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card ORDER BY ts
  MEASURES COUNT(*) AS n
  PATTERN (A* B?)
  DEFINE A AS A.amount > 10
);
