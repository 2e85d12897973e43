-- MATCH_RECOGNIZE as Flink documents it (docs/dev/table/sql/queries/match_recognize.md):
-- sequences per card in event-time order. Expected rows worked out by hand
-- from tests/data/card_payments.ndjson (each query says how).
CREATE TABLE payments (
  card   VARCHAR,
  amount DOUBLE,
  ts     TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '${DATA}/card_payments.ndjson');

-- 1. Small payments, then one over 100 times the last of them, within a minute.
--    a: 5, 3, then 900 > 300. b: 8, then 1000 a minute and a half later: too late.
SELECT card, small_at, smalls, large
FROM payments MATCH_RECOGNIZE (
  PARTITION BY card
  ORDER BY ts
  MEASURES FIRST(S.ts) AS small_at, COUNT(S.*) AS smalls, L.amount AS large
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (S+ L) WITHIN INTERVAL '1' MINUTE
  DEFINE
    S AS S.amount < 10,
    L AS L.amount > 100 * LAST(S.amount)
);

-- 2. A dip and a recovery (Flink's ticker example), skipping to the recovery row:
--    c: 100 90 80 | 85 (up), then 85 70 | 95; a: 5 3 | 900, then 900 50 | 60.
SELECT *
FROM payments MATCH_RECOGNIZE (
  PARTITION BY card
  ORDER BY ts
  MEASURES START_ROW.amount AS start_amount, LAST(DOWN.amount) AS bottom, UP.amount AS up_amount
  AFTER MATCH SKIP TO LAST UP
  PATTERN (START_ROW DOWN+ UP)
  DEFINE
    DOWN AS DOWN.amount < PREV(DOWN.amount),
    UP AS UP.amount > PREV(UP.amount)
) AS T;

-- 3. A reluctant middle: as few B rows as reach a C; running aggregates and CLASSIFIER().
--    a: 5, B = 3, C = 900; b: 8, C = 1000 (no B: AVG is NULL).
SELECT card, last_var, n, avg_b, total
FROM payments MATCH_RECOGNIZE (
  PARTITION BY card
  ORDER BY ts
  MEASURES CLASSIFIER() AS last_var, COUNT(*) AS n, AVG(B.amount) AS avg_b, SUM(amount) AS total
  PATTERN (A B*? C)
  DEFINE
    A AS A.amount < 10,
    C AS C.amount > 500
);

-- 4. Every pair of high (>= 80) or medium (50..80) payments, one match per start row.
CREATE VIEW pairs AS
SELECT *
FROM payments MATCH_RECOGNIZE (
  PARTITION BY card
  ORDER BY ts
  MEASURES FIRST(amount) AS a1, LAST(amount) AS a2, CLASSIFIER() AS cls, MATCH_ROWTIME() AS t
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN ((H | M){2})
  DEFINE
    H AS amount >= 80,
    M AS amount >= 50 AND amount < 80
);
SELECT card, a1, a2, cls FROM pairs;

-- 5. MATCH_ROWTIME() is the matches' event time: windows count them.
--    c's five pairs end at 0:01..0:05, a's three at 0:30, 0:40, 0:50.
SELECT window_start, COUNT(*) AS matches
FROM TABLE(TUMBLE(TABLE pairs, DESCRIPTOR(t), INTERVAL '20' SECOND))
GROUP BY window_start, window_end;
