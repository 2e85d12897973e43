-- fail: MATCH_RECOGNIZE: NEXT() reads rows after the current one
CREATE TABLE payments (card VARCHAR, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '${DATA}/card_payments.ndjson');
SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card ORDER BY ts
  MEASURES COUNT(*) AS n
  PATTERN (A B)
  DEFINE A AS A.amount < NEXT(A.amount)
);
