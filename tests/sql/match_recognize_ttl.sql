-- A state TTL bounds partial matches as WITHIN does: card b's large
-- payment comes 95 s after its small one, past the minute, so only a's
-- pair (3 at 0:10, then 900 at 0:20) matches. Without the SET, b matches too.
SET 'table.exec.state.ttl' = '1 minute';
CREATE TABLE payments (
  card   VARCHAR,
  amount DOUBLE,
  ts     TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '${DATA}/card_payments.ndjson');
SELECT card, small, large
FROM payments MATCH_RECOGNIZE (
  PARTITION BY card
  ORDER BY ts
  MEASURES S.amount AS small, L.amount AS large
  PATTERN (S L)
  DEFINE S AS S.amount < 10, L AS L.amount > 100 * S.amount
);
