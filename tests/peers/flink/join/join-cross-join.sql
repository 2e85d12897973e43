-- origin: https://github.com/apache/flink/blob/0658fb7cac0f0b8ba9cd247fff66dbf642583976/flink-table/flink-table-planner/src/test/java/org/apache/flink/table/planner/plan/nodes/exec/stream/JoinTestPrograms.java (CROSS_JOIN, "join-cross-join")
-- ported: the source and sink connectors (the program's values source and sink are a file and stdout); schemas, data and query as the program has them; its expected rows, every employee with every department, written out as that product
-- expect: +I[Adam, Accounting]
-- expect: +I[Adam, Research]
-- expect: +I[Adam, Human Resources]
-- expect: +I[Adam, HR]
-- expect: +I[Adam, Sales]
-- expect: +I[Adam, People Operations]
-- expect: +I[Adam, Engineering]
-- expect: +I[Baker, Accounting]
-- expect: +I[Baker, Research]
-- expect: +I[Baker, Human Resources]
-- expect: +I[Baker, HR]
-- expect: +I[Baker, Sales]
-- expect: +I[Baker, People Operations]
-- expect: +I[Baker, Engineering]
-- expect: +I[Charlie, Accounting]
-- expect: +I[Charlie, Research]
-- expect: +I[Charlie, Human Resources]
-- expect: +I[Charlie, HR]
-- expect: +I[Charlie, Sales]
-- expect: +I[Charlie, People Operations]
-- expect: +I[Charlie, Engineering]
-- expect: +I[Don, Accounting]
-- expect: +I[Don, Research]
-- expect: +I[Don, Human Resources]
-- expect: +I[Don, HR]
-- expect: +I[Don, Sales]
-- expect: +I[Don, People Operations]
-- expect: +I[Don, Engineering]
-- expect: +I[Victor, Accounting]
-- expect: +I[Victor, Research]
-- expect: +I[Victor, Human Resources]
-- expect: +I[Victor, HR]
-- expect: +I[Victor, Sales]
-- expect: +I[Victor, People Operations]
-- expect: +I[Victor, Engineering]
-- expect: +I[Juliet, Accounting]
-- expect: +I[Juliet, Research]
-- expect: +I[Juliet, Human Resources]
-- expect: +I[Juliet, HR]
-- expect: +I[Juliet, Sales]
-- expect: +I[Juliet, People Operations]
-- expect: +I[Juliet, Engineering]
-- expect: +I[Helena, Accounting]
-- expect: +I[Helena, Research]
-- expect: +I[Helena, Human Resources]
-- expect: +I[Helena, HR]
-- expect: +I[Helena, Sales]
-- expect: +I[Helena, People Operations]
-- expect: +I[Helena, Engineering]
-- expect: +I[Ivana, Accounting]
-- expect: +I[Ivana, Research]
-- expect: +I[Ivana, Human Resources]
-- expect: +I[Ivana, HR]
-- expect: +I[Ivana, Sales]
-- expect: +I[Ivana, People Operations]
-- expect: +I[Ivana, Engineering]

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

insert into MySink SELECT name, department_name FROM EMPLOYEE, DEPARTMENT;
