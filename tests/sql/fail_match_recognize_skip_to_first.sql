-- fail: AFTER MATCH SKIP TO FIRST A would start every next match where the last one started
-- Flink fails such a job at run time; eddy refuses it before it runs.
CREATE TABLE payments (card VARCHAR, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '${DATA}/card_payments.ndjson');
SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card ORDER BY ts
  MEASURES SUM(A.amount) AS total
  AFTER MATCH SKIP TO FIRST A
  PATTERN (A+ C)
  DEFINE A AS SUM(A.amount) < 30
);
