-- MATCH_RECOGNIZE ordered by a PROCTIME() column: rows are matched in the
-- order they are read (a table without event time), as Flink allows. A
-- small payment followed by a large one on the same card.
CREATE TABLE payments (
  card VARCHAR, amount DOUBLE, proc AS PROCTIME()
) WITH (connector = 'values', rows = '{"card": "c1", "amount": 2.0}
{"card": "c2", "amount": 900.0}
{"card": "c1", "amount": 750.0}
{"card": "c2", "amount": 1.0}
{"card": "c2", "amount": 3.0}
{"card": "c2", "amount": 600.0}');
SELECT card, small, large
FROM payments
MATCH_RECOGNIZE (
  PARTITION BY card
  ORDER BY proc
  MEASURES S.amount AS small, L.amount AS large
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (S L)
  DEFINE S AS S.amount < 10, L AS L.amount > 500
);
