-- fail: fail_java_function.sql:2:1: CREATE FUNCTION ... AS 'com.github.nexmark.flink.udf.CountChar' names a Java class, and eddy runs no Java
CREATE FUNCTION count_char AS 'com.github.nexmark.flink.udf.CountChar';
CREATE TABLE clicks (user_id VARCHAR NOT NULL) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
SELECT count_char(user_id, 'c') AS c FROM clicks;
