-- fail: fail_partition_commit.sql:2:1: table 'by_user': option 'sink.partition-commit.policy.kind': eddy publishes a partition's files at every checkpoint and writes no commit marker (_SUCCESS)
CREATE TABLE by_user (user_id VARCHAR, dt VARCHAR) PARTITIONED BY (dt) WITH (
  'connector' = 'filesystem', 'path' = '/tmp/eddy-never-written/by_user', 'format' = 'csv',
  'sink.partition-commit.policy.kind' = 'success-file');
CREATE TABLE clicks (user_id VARCHAR NOT NULL) WITH (connector = 'file', path = '${DATA}/clicks.ndjson');
INSERT INTO by_user SELECT user_id, 'x' FROM clicks;
