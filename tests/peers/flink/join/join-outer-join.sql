-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/JoinTestPrograms.java (FULL_OUTER, "join-outer-join")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them
-- expect: +I[Adam, null]
-- expect: +I[null, Accounting]
-- expect: +I[Baker, Research]
-- expect: +I[Charlie, Human Resources]
-- expect: +I[Charlie, HR]
-- expect: +I[Don, Sales]
-- expect: +I[Victor, null]
-- expect: +I[Helena, Engineering]
-- expect: +I[Juliet, Engineering]
-- expect: +I[Ivana, Research]
-- expect: +I[Charlie, People Operations]

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
  name varchar,
  department_name varchar
) WITH (connector = 'stdout');

insert into MySink SELECT name, department_name FROM EMPLOYEE FULL OUTER JOIN DEPARTMENT ON deptno = department_num;
