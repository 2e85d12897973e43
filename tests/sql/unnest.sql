-- UNNEST, as Flink writes it (CROSS JOIN UNNEST(tags) AS t(tag), the comma
-- form, LEFT JOIN ... ON TRUE) and as DataFusion does (unnest() in SELECT),
-- over ARRAY and JSON-array columns. Expected rows worked out by hand from
-- tests/data/tagged_orders.ndjson: o1 has two tags and two items, o2 empty
-- arrays, o3 NULLs, o4 one of each, o5 a NULL tag and items that are not JSON.
CREATE TABLE orders (
  order_id VARCHAR,
  tags     ARRAY<STRING>,
  items    JSON,
  ts       TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${DATA}/tagged_orders.ndjson');

-- 1. o1 gift, o1 express, o4 express, o5 gift, o5 NULL (empty and NULL arrays give nothing).
SELECT o.order_id, t.tag FROM orders AS o CROSS JOIN UNNEST(o.tags) AS t(tag);

-- 2. LEFT JOIN ... ON TRUE keeps o2 and o3, with a NULL tag.
SELECT order_id, tag FROM orders LEFT JOIN UNNEST(tags) AS t(tag) ON TRUE;

-- 3. JSON arrays: each item's sku and quantity (o5's text is not JSON: no rows).
SELECT order_id, JSON_VALUE(item, '$.sku') AS sku, CAST(JSON_VALUE(item, '$.qty') AS INT) AS qty
FROM orders, UNNEST(JSON_ARRAY_ELEMENTS(items)) AS i(item);

-- 4. The event time passes through: express tags per 10-second window
--    (o1 at 0:01 and o4 at 0:07 in [0:00, 0:10)).
SELECT window_start, COUNT(*) AS express
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  CROSS JOIN UNNEST(tags) AS t(tag)
WHERE tag = 'express'
GROUP BY window_start, window_end;
