-- The kinds and queues the console's job filters offer (SPEC §19, §22): the
-- first %(groups)s of each by name among the newest %(cap)s jobs, read
-- backwards through the primary key, so the cost is the same whatever the
-- table holds.
WITH recent AS MATERIALIZED (
    SELECT kind, queue FROM awc.jobs ORDER BY id DESC LIMIT %(cap)s
)
SELECT ARRAY(SELECT DISTINCT kind FROM recent ORDER BY 1 LIMIT %(groups)s) AS kinds,
       ARRAY(SELECT DISTINCT queue FROM recent ORDER BY 1 LIMIT %(groups)s) AS queues
