-- Flink's data types as its DDL writes them: TIMESTAMP_LTZ(3) and TIMESTAMP
-- WITH LOCAL TIME ZONE (instants, shown in UTC), TIME(3), MAP<K, V> (read
-- with map_extract and m['k']), MULTISET<T> (an element and its count),
-- STRING ARRAY, DEC(p, s), VARIANT (JSON text), and a cast to TIMESTAMP_LTZ.
CREATE TABLE typed (
  k STRING,
  m MAP<STRING, BIGINT>,
  tags STRING ARRAY,
  bag MULTISET<STRING>,
  at TIMESTAMP_LTZ(3),
  t TIME(3),
  amount DEC(10, 2),
  doc VARIANT,
  WATERMARK FOR at AS at - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/flink_types.ndjson');

SELECT k, m['x'] AS x, cardinality(m) AS keys, tags, bag['p'] AS p_count, at,
       CAST(at AS TIMESTAMP(3) WITH LOCAL TIME ZONE) AS at_again, t, amount, doc
FROM typed;
