-- Columns named `key` and `index` (words sqlparser reads as an index
-- constraint at the start of a column list item) are ordinary columns.
CREATE TABLE clicks (
  key     VARCHAR NOT NULL,
  index   VARCHAR NOT NULL,
  amount  DOUBLE,
  ts      BIGINT
) WITH (connector = 'file', path = '${DATA}/keyed_rows.ndjson');

SELECT key, index, amount FROM clicks WHERE amount > 10;
