-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/ChangelogNormalizeTestPrograms.java (CHANGELOG_SOURCE, "changelog-normalize-source")
-- ported: the source and sink connectors (the program's values source with changelog-mode I,UA,UB,D is a file of Debezium JSON changes, each -U/+U pair one update; its sink is stdout); schemas, data and query as the program has them
-- expect: +I[one, 1, a]
-- expect: +I[two, 2, b]
-- expect: -U[one, 1, a]
-- expect: +U[one, 1, aa]
-- expect: +I[three, 3, c]
-- expect: -D[two, 2, b]
-- expect: -U[three, 3, c]
-- expect: +U[three, 3, cc]
-- expect: +I[four, 4, d]
-- expect: +I[five, 5, e]
-- expect: -U[four, 4, d]
-- expect: +U[four, 4, dd]
-- expect: +I[six, 6, f]
-- expect: -D[six, 6, f]

CREATE TABLE source_t (
  a VARCHAR,
  b INT NOT NULL,
  c VARCHAR,
  PRIMARY KEY(a) NOT ENFORCED
) WITH (connector = 'file', path = '${DATA}/source_t.ndjson', format = 'debezium-json');

CREATE TABLE sink_t (
  a VARCHAR,
  b INT,
  c VARCHAR
) WITH (connector = 'stdout');

INSERT INTO sink_t SELECT a, b, c FROM source_t;
