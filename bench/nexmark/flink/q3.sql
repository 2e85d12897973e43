-- Nexmark q3 (local item suggestion: a regular join), in the Nexmark suite's Flink form
-- (github.com/nexmark/nexmark, nexmark-flink/src/main/resources/queries/q3.sql);
-- reads the views of ddl.sql.
CREATE TABLE nexmark_q3 (
  name VARCHAR, city VARCHAR, state VARCHAR, id BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q3
SELECT P.name, P.city, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
