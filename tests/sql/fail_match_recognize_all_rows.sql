-- fail: MATCH_RECOGNIZE: ALL ROWS PER MATCH is not supported
CREATE TABLE payments (card VARCHAR, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '${DATA}/card_payments.ndjson');
SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card ORDER BY ts
  MEASURES A.amount AS a
  ALL ROWS PER MATCH
  PATTERN (A B)
  DEFINE B AS B.amount > A.amount
);
