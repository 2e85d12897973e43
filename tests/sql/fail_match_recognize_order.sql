-- fail: MATCH_RECOGNIZE: ORDER BY must start with the event time 'ts', not 'amount'
CREATE TABLE payments (card VARCHAR, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '${DATA}/card_payments.ndjson');
SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card ORDER BY amount
  MEASURES COUNT(*) AS n
  PATTERN (A B)
  DEFINE A AS A.amount > 10
);
