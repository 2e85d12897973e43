-- Flink's REGEXP_EXTRACT, SPLIT_INDEX, JSON_EXISTS, JSON_QUERY and date-part
-- functions over a VALUES list, worked out by hand: 2023-11-14 22:13:20 is
-- a Tuesday (DAYOFWEEK 3, Sunday = 1), day 318, ISO week 46, quarter 4;
-- 2023-01-01 is a Sunday in ISO week 52 (of 2022).
CREATE VIEW v (s, j, t) AS VALUES
  ('foothebar', '{"a": {"b": [1, {"c": "x"}]}}', TIMESTAMP '2023-11-14 22:13:20'),
  ('Jack,John,Mary', '{"a": 1}', TIMESTAMP '2023-01-01 00:00:00');

SELECT REGEXP_EXTRACT(s, 'foo(.*?)(bar)', 2) AS g2, REGEXP_EXTRACT(s, 'foo(.*?)(bar)') AS g0,
       SPLIT_INDEX(s, ',', 2) AS third,
       JSON_EXISTS(j, '$.a.b[1].c') AS has_c, JSON_QUERY(j, '$.a.b') AS b,
       YEAR(t) AS y, QUARTER(t) AS q, MONTH(t) AS m, WEEK(t) AS w, DAYOFYEAR(t) AS doy,
       DAYOFMONTH(t) AS dom, DAYOFWEEK(t) AS dow, HOUR(t) AS h, MINUTE(t) AS mi, SECOND(t) AS sec
FROM v;
