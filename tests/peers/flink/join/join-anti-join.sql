-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/JoinTestPrograms.java (ANTI_JOIN, "join-anti-join")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[Victor]
-- expect: +I[Juliet]
-- expect: +I[Helena]

CREATE TABLE EMPLOYEE (
  deptno int,
  salary bigint,
  name varchar
) WITH (connector = 'file', path = '${DATA}/EMPLOYEE.ndjson');

CREATE TABLE DEPARTMENT (
  department_num int,
  b2 bigint,
  b3 int,
  department_name varchar
) WITH (connector = 'file', path = '${DATA}/DEPARTMENT_NONULLS.ndjson');

CREATE TABLE MySink (
  name varchar
) WITH (connector = 'stdout');

insert into MySink SELECT name FROM EMPLOYEE WHERE deptno NOT IN (SELECT department_num FROM DEPARTMENT);
