-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/JoinTestPrograms.java (INNER_JOIN_WITH_EQUAL_PK, "join-inner-join-with-equal-pk")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[1, 1]
-- expect: +I[2, 2]
-- expect: +I[3, 3]
-- expect: +I[4, 4]

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
) WITH (connector = 'file', path = '${DATA}/DEPARTMENT.ndjson');

CREATE TABLE MySink (
  deptno int,
  department_num int
) WITH (connector = 'stdout');

INSERT INTO MySink SELECT deptno, department_num FROM (SELECT MIN(salary) AS salary, deptno FROM EMPLOYEE GROUP BY deptno) JOIN (SELECT MIN(b2) AS b2, department_num FROM DEPARTMENT GROUP BY department_num) ON deptno = department_num;
