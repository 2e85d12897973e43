-- Flink's set-operation examples read views over VALUES: a VALUES list is
-- a bounded source (rows written into the job, read once).
-- origin: https://nightlies.apache.org/flink/flink-docs-stable/docs/dev/table/sql/queries/set-ops/
CREATE VIEW t1 (s) AS VALUES ('c'), ('a'), ('b'), ('b'), ('c');
CREATE VIEW t2 (s) AS VALUES ('d'), ('e'), ('a'), ('b'), ('b');

SELECT s FROM t1 UNION ALL SELECT s FROM t2;
SELECT upper(s) AS s, 1 AS n FROM (VALUES ('x'), ('y')) AS t (s);
